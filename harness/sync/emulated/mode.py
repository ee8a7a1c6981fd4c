"""`emulated_device()`: CUDA-style Python calls routed onto the emulated device.

A torch-function mode sees the calls that never reach aten with a device tensor: factories
(`device=`, `pin_memory=`), host-to-device moves (`to`, `cuda`, `new_tensor`), pinned memory, and
the few composites whose CUDA behaviour differs from their CPU decomposition (`F.one_hot`). It
also names each sync after the outermost torch call the user made (`item`, `getitem`, ...).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from harness.sync.emulated import cuda_api, door, pinned
from harness.sync.emulated.tensor import EMU_DEVICE, EmulationError, EmuTensor, nbytes
from harness.sync.emulated.waits import one_hot_kinds
from harness.sync.record import record_sync
from harness.sync.rules import HostMemory, classify_h2d
from harness.sync.state import STATE


def _host_scalar(value: Any) -> Any:
    # a Python number next to device tensors: a host 0-dim tensor, as CUDA makes it (on the
    # `meta` device it would hold no value)
    return torch.tensor(value) if isinstance(value, (int, float, bool)) else value


def _host_index(index: Any) -> Any:
    # a list index becomes an index tensor; torch would make it on `meta`, where it holds no data
    if isinstance(index, list) and all(isinstance(i, int) for i in index):
        return torch.tensor(index)
    if isinstance(index, tuple):
        return tuple(_host_index(i) for i in index)
    return index


class _EmuMode(TorchFunctionMode):
    def __init__(self, claim_cuda: bool) -> None:
        super().__init__()
        self.claim_cuda = claim_cuda

    def wants_emu(self, device: Any) -> bool:
        if device is None:
            return False
        dev = torch.device(device) if not isinstance(device, torch.device) else device
        return dev.type == "meta" or (dev.type == "cuda" and self.claim_cuda)

    def __torch_function__(self, func, _types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        outer = STATE.op is None
        if outer:
            STATE.op = name.strip("_") if name.startswith("__") else name
        try:
            handler = _HANDLERS.get(name)
            if handler is not None:
                return handler(self, func, args, kwargs)
            if "device" in kwargs or "pin_memory" in kwargs:
                return _factory(self, func, args, kwargs)
            return func(*args, **kwargs)
        finally:
            if outer:
                STATE.op = None


Handler = Callable[[_EmuMode, Any, tuple, dict], Any]


def _h2d(src: torch.Tensor, dtype: torch.dtype | None, non_blocking: bool, op: str) -> EmuTensor:
    memory = HostMemory(pinned.is_pinned(src), src.is_contiguous())
    kind = classify_h2d(nbytes(src), non_blocking, memory)
    out = src.to(dtype=dtype, copy=True) if dtype is not None else src.clone()
    if kind is not None:
        record_sync(kind, op, nbytes(out))
    return EmuTensor(out)


def _tensor_to(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    device, dtype, non_blocking, _fmt = torch._C._nn._parse_to(*args[1:], **kwargs)
    if not mode.wants_emu(device):
        return func(*args, **kwargs)
    if not isinstance(self, EmuTensor):
        return _h2d(self, dtype, non_blocking, "to")
    return self if dtype in (None, self.dtype) else func(self, dtype=dtype)


def _tensor_cuda(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if isinstance(self, EmuTensor):
        return self
    if not mode.claim_cuda:
        return func(*args, **kwargs)
    return _h2d(self, None, bool(kwargs.get("non_blocking", False)), "cuda")


def _pin_memory(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if isinstance(self, EmuTensor):
        raise EmulationError("cannot pin a device tensor: only host tensors can be pinned")
    return pinned.pin(self.clone())


def _is_pinned(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> bool:
    return (not isinstance(args[0], EmuTensor)) and pinned.is_pinned(args[0])


def _record_stream(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> None:
    return None


def _new_tensor(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if not isinstance(self, EmuTensor):
        return func(*args, **kwargs)
    kw = dict(kwargs)
    kw.setdefault("dtype", self.dtype)
    kw.pop("device", None)
    return _h2d(torch.tensor(args[1], **kw), None, False, "new_tensor")


def _factory(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    """Any call with device=/pin_memory= keyword arguments."""
    kw = dict(kwargs)
    pin = bool(kw.pop("pin_memory", False))
    if not mode.wants_emu(kw.get("device")):
        out = func(*args, **kw)
        return pinned.pin(out) if pin and isinstance(out, torch.Tensor) else out
    kw["device"] = torch.device("cpu")
    if getattr(func, "__name__", "") not in ("tensor", "as_tensor", "asarray"):
        return door.wrap_outputs(func(*args, **kw))
    data = args[0] if args else kw.pop("data")
    if isinstance(data, EmuTensor):
        return EmuTensor(func(data._elem, *args[1:], **kw))
    # the data lives in (pageable) host memory: a blocking host-to-device copy
    return _h2d(func(data, *args[1:], **kw), None, False, func.__name__)


def _setitem(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self, index, value = args
    if isinstance(self, EmuTensor):
        index, value = _host_index(index), _host_scalar(value)
    return func(self, index, value, **kwargs)


def _getitem(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self, index = args
    if isinstance(self, EmuTensor):
        index = _host_index(index)
    return func(self, index, **kwargs)


def _where(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    return func(*(_host_scalar(a) for a in args), **kwargs)


def _one_hot(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    labels = args[0]
    num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
    if not isinstance(labels, EmuTensor):
        return func(*args, **kwargs)
    for kind in one_hot_kinds(num_classes):
        record_sync(kind, "one_hot")
    return EmuTensor(func(labels._elem, num_classes))


# by name: on a GPU machine the CUDA interceptors may have replaced these with wrappers
_HANDLERS: dict[str, Handler] = {
    "where": _where,
    "__setitem__": _setitem,
    "__getitem__": _getitem,
    "to": _tensor_to,
    "cuda": _tensor_cuda,
    "pin_memory": _pin_memory,
    "is_pinned": _is_pinned,
    "record_stream": _record_stream,
    "new_tensor": _new_tensor,
    "one_hot": _one_hot,
}

_LOCK = threading.Lock()
_DEPTH = 0
_STREAM_API = False


@contextmanager
def emulated_device(claim_cuda: bool | None = None) -> Iterator[torch.device]:
    """Run CUDA-style code on the CPU; yields the device handle to use for device tensors.

    `claim_cuda` (default: when no CUDA device is present): code that says `"cuda"` runs on
    the emulated device, and `torch.cuda`'s streams, events, synchronize and empty_cache are
    emulated (process-wide) while any emulated device is active.
    """
    global _DEPTH, _STREAM_API
    claim = (not torch.cuda.is_available()) if claim_cuda is None else claim_cuda
    with _LOCK:
        _DEPTH += 1
        if claim and not _STREAM_API:
            cuda_api.install()
            _STREAM_API = True
    STATE.emulated += 1
    try:
        with _EmuMode(claim):
            yield EMU_DEVICE
    finally:
        STATE.emulated -= 1
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                if _STREAM_API:
                    cuda_api.uninstall()
                    _STREAM_API = False
                pinned.clear()
