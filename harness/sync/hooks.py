"""Interceptors for real CUDA: installed once per process, at the first ledger opened where CUDA
is present; on a thread with no ledger open each costs one thread-local check.

Intercepting every op in Python costs ~2x a metadata step's host time, so syncs are caught where
they happen. PyTorch's sync debug mode, switched on while any ledger is open, reports implicit
syncs (item, nonzero, blocking copies inside ops...) as warnings, caught here with the caller's
stack. Wrappers around the copy entry points classify transfers by `harness.sync.rules` (the
debug mode says nothing of non_blocking copies through pageable memory); wrappers around stream,
event and device synchronize and `empty_cache` record those (the debug mode misses them). Each
wrapper suppresses the warning its own call raises. Wrappers around indexing and around ops that
read the device only name the op, and for indexing the kind of each wait (from the rules).
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from harness.sync.events import SyncKind
from harness.sync.record import record_sync
from harness.sync.rules import (
    LINALG_EIGH_WAITS,
    UNIQUE_DIM_WAITS,
    HostMemory,
    classify_d2h,
    classify_empty_cache,
    classify_h2d,
    copy_host_memory,
    getitem_kinds,
    setitem_kinds,
)
from harness.sync.state import STATE

_SYNC_WARNING = "called a synchronizing CUDA operation"
_FILTER_MESSAGE = ".*" + _SYNC_WARNING
_WARN = 1  # torch's sync debug mode "warn"
_LOCK = threading.Lock()
_cuda: bool | None = None  # whether this process has CUDA, looked up once
_installed = False
_open = 0  # ledgers open in this process, on any thread
_saved_mode = 0
_next_showwarning: Callable[..., None] = warnings.showwarning


class _Call(threading.local):
    """The indexing call being intercepted on this thread, to classify its waits lazily."""

    def __init__(self) -> None:
        self.rule: Callable[..., list[SyncKind]] | None = None
        self.args: tuple[Any, ...] = ()
        self.kinds: list[SyncKind] | None = None


_CALL = _Call()


def _has_cuda() -> bool:
    global _cuda
    if _cuda is None:
        _cuda = torch.cuda.is_available()
    return _cuda


def _get_debug_mode() -> int:
    return torch._C._cuda_get_sync_debug_mode()


def _set_debug_mode(mode: int) -> None:
    torch._C._cuda_set_sync_debug_mode(mode)


def ledger_opened() -> None:
    """A ledger opened on this thread: install once, switch the debug mode on for the first."""
    global _installed, _open, _saved_mode
    if not _has_cuda():
        return
    with _LOCK:
        if not _installed:
            _install()
            _installed = True
        _open += 1
        if _open == 1:
            _saved_mode = _get_debug_mode()
            _set_debug_mode(_WARN)
    _hook_warnings()


def ledger_closed() -> None:
    global _open
    if not _has_cuda():
        return
    with _LOCK:
        _open -= 1
        if _open == 0:
            _set_debug_mode(_saved_mode)


def _hook_warnings() -> None:
    # pytest and warnings.catch_warnings swap the hook and the filters per block: check each time
    global _next_showwarning
    if warnings.showwarning is not _showwarning:
        _next_showwarning = warnings.showwarning
        warnings.showwarning = _showwarning
    first = warnings.filters[0] if warnings.filters else None
    if first is None or first[0] != "always" or getattr(first[1], "pattern", "") != _FILTER_MESSAGE:
        warnings.filterwarnings("always", message=_FILTER_MESSAGE, category=UserWarning)


def _implicit_kind() -> SyncKind:
    if _CALL.kinds is None and _CALL.rule is not None:
        _CALL.kinds = _CALL.rule(*_CALL.args)
    return _CALL.kinds.pop(0) if _CALL.kinds else SyncKind.D2H_READ


def _showwarning(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    if _SYNC_WARNING in str(message):
        if STATE.ledgers and not STATE.suppress:
            record_sync(_implicit_kind(), "implicit")
        if _saved_mode != _WARN:  # the user had not asked for these warnings themselves
            return
    _next_showwarning(message, category, filename, lineno, file, line)


# ---- wrappers ---------------------------------------------------------------------------------


def _named(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Name the op of the warnings raised inside `fn` (kind d2h_read, from the debug mode)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not STATE.ledgers or STATE.op is not None:
            return fn(*args, **kwargs)
        STATE.op = op
        try:
            return fn(*args, **kwargs)
        finally:
            STATE.op = None

    return wrapper


def _indexing(op: str, fn: Callable[..., Any], rule: Callable[..., list[SyncKind]]) -> Any:
    """Name `t[...]` / `t[...] = v`, and classify its waits by `rule` when one is seen."""

    @functools.wraps(fn)
    def wrapper(self: torch.Tensor, *args: Any) -> Any:
        if not STATE.ledgers or STATE.op is not None or not self.is_cuda:
            return fn(self, *args)
        STATE.op = op
        _CALL.rule, _CALL.args = rule, (self, *args)
        try:
            return fn(self, *args)
        finally:
            STATE.op = None
            _CALL.rule = _CALL.kinds = None

    return wrapper


def _recorded(kind: SyncKind, op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record one `kind` sync per call of `fn` and swallow the warning it may raise."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not STATE.ledgers:
            return fn(*args, **kwargs)
        record_sync(kind, op)
        return _suppressed(fn, *args, **kwargs)

    return wrapper


def _counted(op: str, waits: Callable[..., int], fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record `waits(*args, **kwargs)` reads per call of `fn`, whose waits the debug mode misses
    in part (the warnings it does raise are swallowed); 0: count its warnings as usual."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        n = waits(*args, **kwargs) if STATE.ledgers and not STATE.suppress else 0
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


def _unique_dim_waits(t: Any, *args: Any, dim: int | None = None, **kwargs: Any) -> int:
    dim = args[3] if len(args) > 3 else dim
    return UNIQUE_DIM_WAITS if dim is not None and getattr(t, "is_cuda", False) else 0


def _eigh_waits(t: Any, *args: Any, **kwargs: Any) -> int:
    return LINALG_EIGH_WAITS if getattr(t, "is_cuda", False) else 0


def _suppressed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    STATE.suppress += 1
    try:
        return fn(*args, **kwargs)
    finally:
        STATE.suppress -= 1


def _transfer(kind: SyncKind | None, op: str, nbytes: int, fn: Callable[..., Any], *args, **kw):
    if kind is not None:
        record_sync(kind, op, nbytes)
    return _suppressed(fn, *args, **kw)


def _watching() -> bool:
    """A ledger is open on this thread, no interceptor records the call itself, and the call is
    not one the emulated device classifies (its own door records it)."""
    st = STATE
    return bool(st.ledgers) and not st.suppress and not st.emulated


def _host(t: torch.Tensor) -> HostMemory:
    return HostMemory(t.is_pinned(), t.is_contiguous())


def _wrap_to(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else kwargs.get("device")
        if first is None or isinstance(first, torch.dtype) or not _watching():
            return fn(self, *args, **kwargs)  # a dtype conversion stays on its device
        device, _dtype, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
        if device is None or {self.device.type, device.type} != {"cpu", "cuda"}:
            return fn(self, *args, **kwargs)  # no host-device copy (or not a real GPU)
        if device.type == "cuda":
            kind = classify_h2d(self.nbytes, non_blocking, _host(self))
        else:  # Tensor.to(cpu, non_blocking=True) allocates pinned memory for its result
            kind = classify_d2h(self.nbytes, non_blocking, HostMemory(pinned=non_blocking))
        return _transfer(kind, "to", self.nbytes, fn, self, *args, **kwargs)

    return to


def _wrap_cpu(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def cpu(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not _watching() or not self.is_cuda:
            return fn(self, *args, **kwargs)
        kind = classify_d2h(self.nbytes, False, HostMemory(pinned=False))
        return _transfer(kind, "cpu", self.nbytes, fn, self, *args, **kwargs)

    return cpu


def _wrap_cuda(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def cuda(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not _watching() or self.is_cuda:
            return fn(self, *args, **kwargs)
        kind = classify_h2d(self.nbytes, bool(kwargs.get("non_blocking", False)), _host(self))
        return _transfer(kind, "cuda", self.nbytes, fn, self, *args, **kwargs)

    return cuda


def _wrap_copy(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def copy_(self: torch.Tensor, src: Any, non_blocking: bool = False) -> Any:
        if not _watching() or not hasattr(src, "device"):  # torch rejects a non-tensor itself
            return fn(self, src, non_blocking)
        if self.is_cuda and src.device.type == "cpu":
            memory = copy_host_memory(src, self, src.is_pinned())
            kind = classify_h2d(self.nbytes, non_blocking, memory)
        elif src.is_cuda and self.device.type == "cpu":
            memory = copy_host_memory(self, src, self.is_pinned())
            kind = classify_d2h(self.nbytes, non_blocking, memory)
        else:
            return fn(self, src, non_blocking)
        return _transfer(kind, "copy_", self.nbytes, fn, self, src, non_blocking)

    return copy_


def _from_host_data(op: str, fn: Callable[..., Any], device_of: Callable[..., Any]) -> Any:
    """`torch.tensor(list, device=cuda)` and friends: a blocking copy from pageable memory."""

    @functools.wraps(fn)
    def factory(*args: Any, **kwargs: Any) -> Any:
        device = device_of(*args, **kwargs)
        data = args[1] if op == "new_tensor" else args[0] if args else kwargs.get("data")
        if not _watching() or device is None or isinstance(data, torch.Tensor):
            return fn(*args, **kwargs)
        if torch.device(device).type != "cuda":
            return fn(*args, **kwargs)
        out = _suppressed(fn, *args, **kwargs)
        kind = classify_h2d(out.nbytes, False, HostMemory(pinned=False))
        if kind is not None:
            record_sync(kind, op, out.nbytes)
        return out

    return factory


def _wrap_empty_cache(fn: Callable[[], None]) -> Callable[[], None]:
    @functools.wraps(fn)
    def empty_cache() -> None:
        if not _watching():
            return fn()
        before = torch.cuda.memory_reserved()
        _suppressed(fn)
        released = before - torch.cuda.memory_reserved()
        kind = classify_empty_cache(released)
        if kind is not None:
            record_sync(kind, "empty_cache", released)
        return None

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


def _install() -> None:
    T = torch.Tensor
    for name in _NAMED_METHODS:
        setattr(T, name, _named(name.strip("_"), getattr(T, name)))
    for name in _NAMED_FUNCTIONS:
        setattr(torch, name, _named(name, getattr(torch, name)))
    F.one_hot = _named("one_hot", F.one_hot)
    torch.unique = _counted("unique", _unique_dim_waits, _named("unique", torch.unique))
    for name in ("eigh", "eigvalsh"):
        fn = getattr(torch.linalg, name)
        setattr(torch.linalg, name, _counted(f"linalg_{name}", _eigh_waits, fn))
    T.__getitem__ = _indexing("getitem", T.__getitem__, lambda t, i: getitem_kinds(i, t.dim()))
    T.__setitem__ = _indexing(
        "setitem", T.__setitem__, lambda t, i, v: setitem_kinds(i, t.dim(), v)
    )
    T.to = _wrap_to(T.to)
    T.cpu = _wrap_cpu(T.cpu)
    T.cuda = _wrap_cuda(T.cuda)
    T.copy_ = _wrap_copy(T.copy_)
    for name in ("tensor", "as_tensor"):
        setattr(torch, name, _from_host_data(name, getattr(torch, name), _device_kwarg))
    T.new_tensor = _from_host_data("new_tensor", T.new_tensor, _new_tensor_device)
    cuda = torch.cuda
    cuda.synchronize = _recorded(SyncKind.EXPLICIT, "cuda.synchronize", cuda.synchronize)
    cuda.Stream.synchronize = _recorded(
        SyncKind.EXPLICIT, "Stream.synchronize", cuda.Stream.synchronize
    )
    cuda.Event.synchronize = _recorded(
        SyncKind.EXPLICIT, "Event.synchronize", cuda.Event.synchronize
    )
    cuda.empty_cache = _wrap_empty_cache(cuda.empty_cache)


def _device_kwarg(*args: Any, **kwargs: Any) -> Any:
    return kwargs.get("device")


def _new_tensor_device(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    return kwargs.get("device", self.device)
