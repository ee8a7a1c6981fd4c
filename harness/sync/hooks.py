"""Interceptors for real CUDA, on while at least one ledger is open (any thread).

Intercepting every op in Python costs ~2x a metadata step's host time, so we hook only where
syncs happen: PyTorch's sync debug mode reports implicit syncs (item, nonzero, blocking copies...)
as warnings, caught here with the caller's stack; thin wrappers around the copy entry points
classify transfers by direction and pinned-ness (a non_blocking copy from pageable memory is not
warned about); wrappers around stream/event/device synchronize record explicit syncs (the latter
two are not warned about either). Each wrapper suppresses the warning its own call raises.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch

from harness.sync.events import SyncKind
from harness.sync.record import record_sync
from harness.sync.rules import classify_d2h, classify_h2d
from harness.sync.state import STATE

_SYNC_WARNING = "called a synchronizing CUDA operation"
_LOCK = threading.Lock()
_USERS = 0
_SAVED: list[tuple[Any, str, Any]] = []
_saved_mode = 0
_saved_showwarning: Callable[..., None] | None = None
_FILTER = ("always", None, UserWarning, None, 0)


def acquire() -> None:
    global _USERS
    with _LOCK:
        _USERS += 1
        if _USERS == 1 and torch.cuda.is_available():
            _install()


def release() -> None:
    global _USERS
    with _LOCK:
        _USERS -= 1
        if _USERS == 0 and _SAVED:
            _uninstall()


def installed() -> bool:
    return bool(_SAVED)


# ---- wrappers -------------------------------------------------------------------------------


def _named(op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Name the op for warnings raised inside `fn` (kind d2h_read, from the sync debug mode)."""

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


def _recorded(kind: SyncKind, op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record one `kind` sync per call of `fn` and swallow the warning it may raise."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not STATE.ledgers:
            return fn(*args, **kwargs)
        record_sync(kind, op)
        STATE.suppress += 1
        try:
            return fn(*args, **kwargs)
        finally:
            STATE.suppress -= 1

    return wrapper


def _transfer_kind(
    src: torch.Tensor, dst_device: torch.device, non_blocking: bool, dst_pinned: bool | None
) -> SyncKind | None:
    s_dev = src.device.type == "cuda"
    d_dev = dst_device.type == "cuda"
    if not s_dev and d_dev:
        return classify_h2d(non_blocking, src.is_pinned())
    if s_dev and not d_dev:
        # Tensor.to(cpu, non_blocking=True) allocates pinned memory for its result
        return classify_d2h(non_blocking, True if dst_pinned is None else dst_pinned)
    return None


def _run_transfer(
    kind: SyncKind | None, op: str, nbytes: int, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    if kind is not None:
        record_sync(kind, op, nbytes)
    STATE.suppress += 1
    try:
        return fn(*args, **kwargs)
    finally:
        STATE.suppress -= 1


def _wrap_to(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not STATE.ledgers or STATE.suppress:
            return fn(self, *args, **kwargs)
        device, _dtype, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
        if device is None or "cuda" not in (self.device.type, device.type):
            return fn(self, *args, **kwargs)  # no real GPU involved (e.g. the emulated device)
        kind = _transfer_kind(self, device, non_blocking, None)
        return _run_transfer(kind, "to", self.nbytes, fn, self, *args, **kwargs)

    return to


def _wrap_cpu(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def cpu(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not STATE.ledgers or STATE.suppress or self.device.type != "cuda":
            return fn(self, *args, **kwargs)
        return _run_transfer(SyncKind.D2H_READ, "cpu", self.nbytes, fn, self, *args, **kwargs)

    return cpu


def _wrap_cuda(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def cuda(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not STATE.ledgers or STATE.suppress or self.device.type == "cuda":
            return fn(self, *args, **kwargs)
        kind = classify_h2d(bool(kwargs.get("non_blocking", False)), self.is_pinned())
        return _run_transfer(kind, "cuda", self.nbytes, fn, self, *args, **kwargs)

    return cuda


def _wrap_copy(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def copy_(self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> Any:
        if (
            not STATE.ledgers
            or STATE.suppress
            or not isinstance(src, torch.Tensor)
            or "cuda" not in (self.device.type, src.device.type)
        ):
            return fn(self, src, non_blocking)
        pinned = self.is_pinned() if self.device.type == "cpu" else None
        kind = _transfer_kind(src, self.device, non_blocking, pinned)
        return _run_transfer(kind, "copy_", self.nbytes, fn, self, src, non_blocking)

    return copy_


def _wrap_factory(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def factory(data: Any, *args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device")
        if not STATE.ledgers or STATE.suppress or device is None or isinstance(data, torch.Tensor):
            return fn(data, *args, **kwargs)
        if torch.device(device).type != "cuda":
            return fn(data, *args, **kwargs)
        out = _run_transfer(None, name, 0, fn, data, *args, **kwargs)
        record_sync(SyncKind.H2D_BLOCKING, name, out.nbytes)
        return out

    return factory


def _patch(owner: Any, name: str, wrapper: Callable[..., Any]) -> None:
    original = getattr(owner, name)
    _SAVED.append((owner, name, original))
    setattr(owner, name, wrapper)


def _showwarning(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    if _SYNC_WARNING in str(message):
        if STATE.ledgers and not STATE.suppress:
            record_sync(SyncKind.D2H_READ, "implicit")
        if _saved_mode != 1:  # the user had not asked for these warnings themselves
            return
    assert _saved_showwarning is not None
    _saved_showwarning(message, category, filename, lineno, file, line)


def _install() -> None:
    global _saved_mode, _saved_showwarning
    T = torch.Tensor
    for op in (
        "item",
        "tolist",
        "__int__",
        "__float__",
        "__bool__",
        "__index__",
        "nonzero",
        "repeat_interleave",
        "masked_select",
        "unique",
        "__getitem__",
        "__setitem__",
    ):
        _patch(T, op, _named(op.strip("_"), getattr(T, op)))
    for op in ("nonzero", "repeat_interleave", "masked_select", "unique", "equal", "argwhere"):
        _patch(torch, op, _named(op, getattr(torch, op)))
    _patch(T, "to", _wrap_to(T.to))
    _patch(T, "cpu", _wrap_cpu(T.cpu))
    _patch(T, "cuda", _wrap_cuda(T.cuda))
    _patch(T, "copy_", _wrap_copy(T.copy_))
    for name in ("tensor", "as_tensor"):
        _patch(torch, name, _wrap_factory(name, getattr(torch, name)))
    _patch(
        torch.cuda,
        "synchronize",
        _recorded(SyncKind.EXPLICIT, "cuda.synchronize", torch.cuda.synchronize),
    )
    _patch(
        torch.cuda.Stream,
        "synchronize",
        _recorded(SyncKind.EXPLICIT, "Stream.synchronize", torch.cuda.Stream.synchronize),
    )
    _patch(
        torch.cuda.Event,
        "synchronize",
        _recorded(SyncKind.EXPLICIT, "Event.synchronize", torch.cuda.Event.synchronize),
    )
    _patch(
        torch.cuda,
        "empty_cache",
        _recorded(SyncKind.ALLOCATOR, "empty_cache", torch.cuda.empty_cache),
    )
    _saved_mode = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    _saved_showwarning = warnings.showwarning
    warnings.showwarning = _showwarning
    warnings.filterwarnings(_FILTER[0], message=".*" + _SYNC_WARNING, category=UserWarning)


def _uninstall() -> None:
    global _saved_showwarning
    torch.cuda.set_sync_debug_mode(_saved_mode)
    if _saved_showwarning is not None:
        warnings.showwarning = _saved_showwarning
        _saved_showwarning = None
    warnings.filters[:] = [
        f
        for f in warnings.filters
        if not (f[0] == "always" and f[1] is not None and _SYNC_WARNING in f[1].pattern)
    ]
    warnings._filters_mutated()  # type: ignore[attr-defined]
    while _SAVED:
        owner, name, original = _SAVED.pop()
        setattr(owner, name, original)
