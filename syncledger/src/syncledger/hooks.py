"""Interceptors for real CUDA: installed once per process, at the first ledger opened where CUDA
is present; on a thread no ledger records each costs one check.

Intercepting every op in Python costs ~2x a metadata step's host time, so syncs are caught where
they happen. Where CUPTI is attached (`syncledger.cupti`) the driver's own synchronizing calls
are the detector of the implicit syncs (item, nonzero, blocking copies inside ops...); where it
is not, PyTorch's sync debug mode, switched on while any ledger is open, reports them as
warnings, caught here with the caller's stack. Never both: one detector per wait. Wrappers around
the copy entry points classify transfers by `syncledger.rules` from what the call did (neither
detector says what a non_blocking copy through pageable memory was); wrappers around stream,
event and device synchronize and `empty_cache` record those. Each wrapper suppresses the events
its own call raises. With no ledger but a wait timer open (a time pass), the synchronizing
wrappers time the host's wait inside their call instead (syncledger.wait_timer); nothing else
pays. Wrappers around indexing and around ops that read the device only name the op, and for
indexing the kind of each wait (from the rules).

Transparency comes first: every wrapper passes the call through with its own arguments,
whatever PyTorch accepts now or later, and returns its result or raises its error unchanged. What
the ledger cannot classify is recorded as `unclassified` with a warning (once per op), never
raised into the program; and nothing is intercepted while torch.compile traces. With CUPTI
attached, the program's own sync debug mode is left as it set it.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from syncledger import cupti
from syncledger.classify import CALL, classification_failed, implicit_kind
from syncledger.events import SyncKind, capture_stack
from syncledger.platform import cuda_present
from syncledger.record import record_sync
from syncledger.rules import (
    LINALG_EIGH_WAITS,
    UNIQUE_DIM_WAITS,
    HostMemory,
    classify_d2h,
    classify_empty_cache,
    classify_h2d,
    copy_host_memory,
    getitem_kinds,
    index_arg,
    setitem_kinds,
)
from syncledger.state import PROCESS_LEDGERS, STATE, watching
from syncledger.wait_timing import add_wait, timed

_SYNC_WARNING = "called a synchronizing CUDA operation"
_FILTER_MESSAGE = ".*" + _SYNC_WARNING
_WARN = 1  # torch's sync debug mode "warn"
_LOCK = threading.Lock()
_installed = False
_open = 0  # ledgers open in this process, on any thread
_forced = False  # the ledger switched the sync debug mode to "warn"; _saved_mode was the program's
_saved_mode = 0
_next_showwarning: Callable[..., None] = warnings.showwarning
_HOOKS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_compiling = torch.compiler.is_compiling


def _has_cuda() -> bool:
    return cuda_present() if _cuda is None else _cuda


_cuda: bool | None = None  # None: as cuda_present() says; set, it says otherwise


def _get_debug_mode() -> int:
    return torch._C._cuda_get_sync_debug_mode()


def _set_debug_mode(mode: int) -> None:
    torch._C._cuda_set_sync_debug_mode(mode)


def install() -> None:
    """Install the interceptors in this process (once; they pass everything through while no
    ledger records the calling thread). Done by the first ledger where CUDA is present."""
    global _installed
    if _installed:
        return
    with _LOCK:
        if not _installed:
            _install()
            _installed = True


def detectors() -> tuple[str, ...]:
    """The detectors that see this process's syncs on CUDA now (empty without CUDA)."""
    if not (_has_cuda() and _installed):
        return ()
    return ("interceptor", "cupti") if cupti.attached() else ("interceptor", "sync_debug_mode")


def ledger_opened() -> None:
    """A ledger opened: install once and attach CUPTI for the first; without CUPTI, switch the
    sync debug mode on while any ledger is open."""
    global _open
    if not _has_cuda():
        return
    install()
    cupti.attach()
    with _LOCK:
        _open += 1
        first = _open == 1
    if first:  # CUPTI attaching or detaching meanwhile sets it again (ON_CHANGE)
        _set_debug_mode_for_ledgers()
    _hook_warnings()


def ledger_closed() -> None:
    global _open
    if not _has_cuda():
        return
    with _LOCK:
        _open -= 1
        last = _open == 0
    if last:
        _set_debug_mode_for_ledgers()


def _set_debug_mode_for_ledgers() -> None:
    """Set the sync debug mode to warn while a ledger is open and CUPTI is not attached;
    otherwise leave the mode the program set, which the ledger then neither reads nor changes."""
    global _forced, _saved_mode
    with _LOCK:
        wanted = _open > 0 and not cupti.attached()
        if wanted and not _forced:
            _saved_mode = _get_debug_mode()
            _set_debug_mode(_WARN)
            _forced = True
        elif _forced and not wanted:
            _set_debug_mode(_saved_mode)
            _forced = False


cupti.ON_CHANGE.append(_set_debug_mode_for_ledgers)


def _hook_warnings() -> None:
    # pytest and warnings.catch_warnings swap the hook and the filters per block: check each time
    global _next_showwarning
    if warnings.showwarning is not _showwarning:
        _next_showwarning = warnings.showwarning
        warnings.showwarning = _showwarning
    first = warnings.filters[0] if warnings.filters else None
    if first is None or first[0] != "always" or getattr(first[1], "pattern", "") != _FILTER_MESSAGE:
        warnings.filterwarnings("always", message=_FILTER_MESSAGE, category=UserWarning)


def _showwarning(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    if _SYNC_WARNING in str(message):
        try:
            if watching() and not STATE.suppress and not cupti.attached():
                record_sync(implicit_kind(), "implicit", detector="sync_debug_mode")
        except Exception as exc:  # never into the program
            classification_failed("a sync debug mode warning", exc)
        if _forced and _saved_mode != _WARN:  # raised only because the ledger asked for them
            return
    elif filename.startswith(_HOOKS_DIR):
        # raised inside a wrapped C function: Python names the wrapper's frame; show the caller's
        caller = capture_stack(2)
        if caller:
            filename, lineno = caller[0][0], caller[0][1]
    _next_showwarning(message, category, filename, lineno, file, line)


# ---- wrappers ---------------------------------------------------------------------------------


def _watching() -> bool:
    """A ledger records this thread, no interceptor records the call itself, the call is not one
    the emulated device classifies (its own door records it), and torch.compile is not tracing
    (asked last: it is the dearest question, and only a recorded thread asks it)."""
    st = STATE
    if st.suppress or st.emulated or not (st.ledgers or PROCESS_LEDGERS):
        return False
    return not _compiling()


def _timing() -> bool:
    """A wait timer is open on this thread (syncledger.wait_timer), no ledger records it, and
    the call is CUDA's own (the emulated device's door times its own)."""
    st = STATE
    if not st.wait_timers or st.emulated or watching():
        return False
    return not _compiling()


def _timed_transfer(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    classify: Callable[[Any], tuple[SyncKind | None, int | None]],
) -> Any:
    """Call `fn`, then keep its host time as a wait when `classify(result)` says it synced (a
    failure to classify keeps nothing and is never raised)."""
    t0 = time.perf_counter_ns()
    out = fn(*args, **kwargs)
    waited = time.perf_counter_ns() - t0
    try:
        kind, _nbytes = classify(out)
    except Exception:
        kind = None
    if kind is not None:
        add_wait(kind, t0, waited)
    return out


def _suppressed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    STATE.suppress += 1
    try:
        return fn(*args, **kwargs)
    finally:
        STATE.suppress -= 1


def _record(op: str, classify: Callable[[], tuple[SyncKind | None, int | None]]) -> None:
    """Record what `classify` decides about a call that already ran; a failure is recorded as
    `unclassified`, never raised."""
    try:
        kind, nbytes = classify()
    except Exception as exc:
        kind, nbytes = classification_failed(op, exc), None
    if kind is not None:
        record_sync(kind, op, nbytes, skip=3)


def _named(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Name the op of the waits seen inside `fn` (kind d2h_read, from the debug mode or CUPTI)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _timing() and args and getattr(args[0], "is_cuda", False):
            return timed(SyncKind.D2H_READ, fn, *args, **kwargs)
        if STATE.op is not None or not _watching():
            return fn(*args, **kwargs)
        STATE.op = op
        try:
            return fn(*args, **kwargs)
        finally:
            STATE.op = None

    return wrapper


def _indexing(
    op: str,
    fn: Callable[..., Any],
    rule: Callable[..., list[SyncKind]],
    waitless: Callable[..., bool],
) -> Any:
    """Name `t[...]` / `t[...] = v`, and classify its waits by `rule` when one is seen; a call
    `waitless(*args)` says makes no wait runs as it is (the common, sync-free indexing)."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if STATE.op is not None or not _watching():
            return fn(self, *args, **kwargs)
        if not getattr(self, "is_cuda", False):
            return fn(self, *args, **kwargs)
        try:
            cannot_wait = waitless(*args)
        except Exception:  # it cannot tell: the call may wait
            cannot_wait = False
        if cannot_wait:
            return fn(self, *args, **kwargs)
        STATE.op = op
        CALL.rule, CALL.args = rule, (self, *args)
        try:
            return fn(self, *args, **kwargs)
        finally:
            STATE.op = None
            CALL.rule = CALL.kinds = None

    return wrapper


_BASIC_INDEX = (int, slice, type(None), type(Ellipsis))


def _basic(index: object) -> bool:
    """Ints, slices, None and Ellipsis (or a tuple of them): a view, never a wait."""
    if type(index) is tuple:
        for part in index:  # noqa: SIM110  # a loop is quicker than all(...) per indexing call
            if not isinstance(part, _BASIC_INDEX):
                return False
        return True
    return isinstance(index, _BASIC_INDEX)


def _device_index(index: object) -> bool:
    """One device tensor of integers (not a mask, by the rules): never a wait."""
    return (
        isinstance(index, torch.Tensor)
        and index.is_cuda
        and not index_arg(True, index.dtype).is_mask
    )


def _getitem_waitless(index: object) -> bool:
    return _basic(index) or _device_index(index)


def _setitem_waitless(index: object, value: object) -> bool:
    """A device tensor written through a basic or device index: on the device, never a wait."""
    on_device = isinstance(value, torch.Tensor) and value.is_cuda
    return on_device and (_basic(index) or _device_index(index))


def _recorded(kind: SyncKind, op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record one `kind` sync per call of `fn` and swallow the events it raises itself."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _timing():
            return timed(kind, fn, *args, **kwargs)
        if not _watching():
            return fn(*args, **kwargs)
        record_sync(kind, op)
        return _suppressed(fn, *args, **kwargs)

    return wrapper


def _counted(op: str, waits: Callable[..., int], fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record `waits(*args, **kwargs)` reads per call of `fn`, whose waits the debug mode misses
    in part (the events it does raise are swallowed); 0: record its waits as usual."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _watching():
            return fn(*args, **kwargs)
        try:
            n = waits(*args, **kwargs)
        except Exception as exc:
            classification_failed(op, exc)
            n = 0
        if not n:
            return fn(*args, **kwargs)
        outer = STATE.op is None
        if outer:
            STATE.op = op
        try:
            for _ in range(n):
                record_sync(SyncKind.D2H_READ, op)
            return _suppressed(fn, *args, **kwargs)
        finally:
            if outer:
                STATE.op = None

    return wrapper


def _unique_dim_waits(t: Any, *args: Any, **kwargs: Any) -> int:
    dim = args[3] if len(args) > 3 else kwargs.get("dim")
    return UNIQUE_DIM_WAITS if dim is not None and getattr(t, "is_cuda", False) else 0


def _eigh_waits(t: Any, *args: Any, **kwargs: Any) -> int:
    return LINALG_EIGH_WAITS if getattr(t, "is_cuda", False) else 0


def _host(t: torch.Tensor) -> HostMemory:
    return HostMemory(t.is_pinned(), t.is_contiguous())


NonBlocking = Callable[[tuple[Any, ...], dict[str, Any]], bool]


def _non_blocking_at(position: int) -> NonBlocking:
    """`non_blocking` passed by keyword or at `position`."""

    def read(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if "non_blocking" in kwargs:
            return bool(kwargs["non_blocking"])
        return bool(args[position]) if len(args) > position else False

    return read


def _to_non_blocking(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """`Tensor.to`'s overloads: by keyword, or the first positional bool (before `copy` in each)."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    return next((a for a in args if type(a) is bool), False)


def _blocking(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return False


_COPY_NON_BLOCKING = _non_blocking_at(1)  # copy_(src, non_blocking=False)


def _moved(src: torch.Tensor, out: Any) -> tuple[str, str] | None:
    """(from, to) device types when the call copied between host and a GPU, else None."""
    if out is src or src.is_cuda == out.is_cuda:  # asked first: cheaper than the devices
        return None
    pair = (src.device.type, out.device.type)
    return pair if pair in (("cpu", "cuda"), ("cuda", "cpu")) else None


def _transfer_kind(
    src: torch.Tensor, out: Any, non_blocking: bool
) -> tuple[SyncKind | None, int | None]:
    moved = _moved(src, out)
    if moved is None:
        return None, None
    if moved[1] == "cuda":
        return classify_h2d(src.nbytes, non_blocking, _host(src)), src.nbytes
    return classify_d2h(src.nbytes, non_blocking, _host(out)), src.nbytes


def _method_transfer(
    op: str, fn: Callable[..., Any], non_blocking: NonBlocking
) -> Callable[..., Any]:
    """`Tensor.to` / `.cuda()` / `.cpu()`: classified from the tensor the call returned (its
    device and pinned memory), with `non_blocking` read as the call passed it."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _timing():
            nb = non_blocking(args, kwargs)
            return _timed_transfer(fn, (self, *args), kwargs, lambda o: _transfer_kind(self, o, nb))
        if not _watching():
            return fn(self, *args, **kwargs)
        out = _suppressed(fn, self, *args, **kwargs)
        _record(op, lambda: _transfer_kind(self, out, non_blocking(args, kwargs)))
        return out

    return wrapper


def _copy_kind(
    dst: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[SyncKind | None, int | None]:
    src = args[0] if args else kwargs["src"]
    if not hasattr(src, "device"):  # a Python number fills the tensor: no transfer
        return None, None
    if dst.is_cuda == src.is_cuda:  # on one side of the bus: no transfer
        return None, None
    non_blocking = _COPY_NON_BLOCKING(args, kwargs)
    if dst.is_cuda and src.device.type == "cpu":
        memory = copy_host_memory(src, dst, src.is_pinned())
        return classify_h2d(dst.nbytes, non_blocking, memory), dst.nbytes
    if src.is_cuda and dst.device.type == "cpu":
        memory = copy_host_memory(dst, src, dst.is_pinned())
        return classify_d2h(dst.nbytes, non_blocking, memory), dst.nbytes
    return None, None


def _wrap_copy(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def copy_(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _timing():
            return _timed_transfer(
                fn, (self, *args), kwargs, lambda _o: _copy_kind(self, args, kwargs)
            )
        if not _watching():
            return fn(self, *args, **kwargs)
        out = _suppressed(fn, self, *args, **kwargs)
        _record("copy_", lambda: _copy_kind(self, args, kwargs))
        return out

    return copy_


def _from_host_kind(data: Any, out: Any) -> tuple[SyncKind | None, int | None]:
    """`torch.tensor(data, device=cuda)` and friends: data that was not already on the GPU
    came from host memory, copied in with a blocking copy."""
    if not getattr(out, "is_cuda", False):
        return None, None
    if isinstance(data, torch.Tensor) and data.device.type != "cpu":
        return None, None
    return classify_h2d(out.nbytes, False, HostMemory(pinned=False)), out.nbytes


def _from_host_data(op: str, fn: Callable[..., Any], data_at: int) -> Callable[..., Any]:
    @functools.wraps(fn)
    def factory(*args: Any, **kwargs: Any) -> Any:
        if _timing():
            data = args[data_at] if len(args) > data_at else kwargs.get("data")
            return _timed_transfer(fn, args, kwargs, lambda o: _from_host_kind(data, o))
        if not _watching():
            return fn(*args, **kwargs)
        out = _suppressed(fn, *args, **kwargs)
        data = args[data_at] if len(args) > data_at else kwargs.get("data")
        _record(op, lambda: _from_host_kind(data, out))
        return out

    return factory


def _wrap_empty_cache(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def empty_cache(*args: Any, **kwargs: Any) -> Any:
        if not _watching():
            return fn(*args, **kwargs)
        before = torch.cuda.memory_reserved()
        out = _suppressed(fn, *args, **kwargs)

        def classify() -> tuple[SyncKind | None, int | None]:
            released = before - torch.cuda.memory_reserved()
            return classify_empty_cache(released), released

        _record("empty_cache", classify)
        return out

    return empty_cache


# ops that read the device, named for the events the debug mode reports inside them
_NAMED_METHODS = (
    "item",
    "tolist",
    "__int__",
    "__float__",
    "__bool__",
    "__index__",
    "__repr__",
    "__format__",
    "__contains__",
    "nonzero",
    "repeat_interleave",
    "masked_select",
    "unique",
    "unique_consecutive",
    "bincount",
    "histc",
    "equal",
    "allclose",
    "masked_fill_",
)
_NAMED_FUNCTIONS = (
    "nonzero",
    "argwhere",
    "repeat_interleave",
    "masked_select",
    "unique_consecutive",
    "bincount",
    "histc",
    "equal",
    "allclose",
)


def _patches() -> list[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]:
    """(owner, attribute, wrapper maker) of every interceptor."""
    T, cuda = torch.Tensor, torch.cuda
    named = [(T, n, functools.partial(_named, n.strip("_"))) for n in _NAMED_METHODS]
    named += [(torch, n, functools.partial(_named, n)) for n in _NAMED_FUNCTIONS]

    def unique(fn: Callable[..., Any]) -> Callable[..., Any]:
        return _counted("unique", _unique_dim_waits, _named("unique", fn))

    def getitem(fn: Callable[..., Any]) -> Callable[..., Any]:
        rule = lambda t, i: getitem_kinds(i, t.dim())  # noqa: E731
        return _indexing("getitem", fn, rule, _getitem_waitless)

    def setitem(fn: Callable[..., Any]) -> Callable[..., Any]:
        rule = lambda t, i, v: setitem_kinds(i, t.dim(), v)  # noqa: E731
        return _indexing("setitem", fn, rule, _setitem_waitless)

    return [
        *named,
        (F, "one_hot", functools.partial(_named, "one_hot")),
        (torch, "unique", unique),
        *[
            (torch.linalg, n, functools.partial(_counted, f"linalg_{n}", _eigh_waits))
            for n in ("eigh", "eigvalsh")
        ],
        (T, "__getitem__", getitem),
        (T, "__setitem__", setitem),
        (T, "to", lambda fn: _method_transfer("to", fn, _to_non_blocking)),
        (T, "cuda", lambda fn: _method_transfer("cuda", fn, _non_blocking_at(1))),
        (T, "cpu", lambda fn: _method_transfer("cpu", fn, _blocking)),
        (T, "copy_", _wrap_copy),
        (torch, "tensor", lambda fn: _from_host_data("tensor", fn, 0)),
        (torch, "as_tensor", lambda fn: _from_host_data("as_tensor", fn, 0)),
        (T, "new_tensor", lambda fn: _from_host_data("new_tensor", fn, 1)),
        (cuda, "synchronize", functools.partial(_recorded, SyncKind.EXPLICIT, "cuda.synchronize")),
        (
            cuda.Stream,
            "synchronize",
            functools.partial(_recorded, SyncKind.EXPLICIT, "Stream.synchronize"),
        ),
        (
            cuda.Event,
            "synchronize",
            functools.partial(_recorded, SyncKind.EXPLICIT, "Event.synchronize"),
        ),
        (cuda, "empty_cache", _wrap_empty_cache),
    ]


PATCHED: list[tuple[Any, str]] = []  # what _install replaced, in order


def _install() -> None:
    for owner, name, wrap in _patches():
        setattr(owner, name, wrap(getattr(owner, name)))
        PATCHED.append((owner, name))
