"""`emulated_device()`: CUDA-style Python calls routed onto the emulated device.

A torch-function mode sees the calls that never reach aten with a device tensor: factories
(`device=`, `pin_memory=`), host-to-device moves (`to`, `cuda`, `new_tensor`), pinned memory, and
the few composites whose CUDA behaviour differs from their CPU decomposition (`F.one_hot`). It
also names each sync after the outermost torch call the user made (`item`, `getitem`, ...) and
applies CUDA autocast's casts (`syncledger.emulated.autocast`).

The emulated device is the process's, like a GPU: while one is active, threads started in the
meantime run on it too, the factory kernels make emulated memory
(`syncledger.emulated.factories`), and torch.compile runs its functions eagerly (Dynamo is
disabled: a graph cannot hold a sync, so compiled code syncs where its eager code does, at
graph breaks).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from syncledger.emulated import autocast, capture, cuda_api, door, factories, pinned, triton_launch
from syncledger.emulated.tensor import CLAIM, EMU_DEVICE, EmulationError, EmuTensor, nbytes
from syncledger.emulated.waits import one_hot_kinds
from syncledger.platform import cuda_present
from syncledger.rules import HostMemory, classify_h2d
from syncledger.state import STATE

_DYNAMO_ENV = "TORCH_COMPILE_DISABLE"


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
        known = _SEEN.get(func)
        if known is None:
            known = _SEEN[func] = _describe(func)
        name, op, handler = known
        st = STATE
        outer = st.op is None
        if outer:
            st.op = op
        try:
            if _any_autocast():
                args, kwargs = autocast.cast_args(name, args, kwargs)
            if handler is not None:
                return handler(self, func, args, kwargs)
            if kwargs and ("device" in kwargs or "pin_memory" in kwargs):
                return _factory(self, func, args, kwargs)
            return func(*args, **kwargs)
        finally:
            if outer:
                st.op = None


Handler = Callable[[_EmuMode, Any, tuple, dict], Any]


def _h2d(src: torch.Tensor, dtype: torch.dtype | None, non_blocking: bool, op: str) -> EmuTensor:
    memory = HostMemory(pinned.is_pinned(src), src.is_contiguous())
    kind = classify_h2d(nbytes(src), non_blocking, memory)
    out = EmuTensor(_host_copy(src, dtype))
    if kind is not None:
        capture.wait(kind, op, nbytes(out))
    if capture.CAPTURE.steps is not None:  # a captured copy reads the host memory at each replay
        capture.record(lambda: _host_copy(src, dtype), out)
    return out


def _host_copy(src: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return src.to(dtype=dtype, copy=True) if dtype is not None else src.clone()


def _to_target(args: tuple, kwargs: dict) -> tuple[Any, torch.dtype | None, bool, bool]:
    """(device, dtype, non_blocking, copy) of `Tensor.to(*args, **kwargs)`, for any of its
    overloads, read without re-parsing (keywords PyTorch adds later pass through untouched)."""
    rest = list(args)
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    if rest and isinstance(rest[0], torch.Tensor):  # to(other, ...): its device and dtype
        other = rest.pop(0)
        device, dtype = other.device, other.dtype
    elif rest and not isinstance(rest[0], (bool, torch.dtype)):
        device = rest.pop(0)
    if rest and isinstance(rest[0], torch.dtype):
        dtype = rest.pop(0)
    flags = [a for a in rest if type(a) is bool]  # (non_blocking, copy), in order
    non_blocking = bool(kwargs.get("non_blocking", flags[0] if flags else False))
    copy = bool(kwargs.get("copy", flags[1] if len(flags) > 1 else False))
    return device, dtype, non_blocking, copy


def _tensor_to(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    device, dtype, non_blocking, copy = _to_target(args[1:], kwargs)
    if not mode.wants_emu(device):
        return func(*args, **kwargs)
    if not isinstance(self, EmuTensor):
        return _h2d(self, dtype, non_blocking, "to")
    if dtype in (None, self.dtype) and not copy:
        return self
    keep = {k: v for k, v in kwargs.items() if k == "memory_format"}
    return func(self, dtype=dtype or self.dtype, copy=copy, **keep)


def _tensor_cuda(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if isinstance(self, EmuTensor):
        return self
    if not mode.claim_cuda:
        return func(*args, **kwargs)
    non_blocking = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
    return _h2d(self, None, bool(non_blocking), "cuda")


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
        out = door.wrap_outputs(func(*args, **kw))
        if capture.CAPTURE.steps is not None:  # a graph makes its factories' values again
            capture.record(lambda: func(*args, **kw), out)
        return out
    data = args[0] if args else kw.pop("data")
    if isinstance(data, EmuTensor):
        return EmuTensor(func(data._elem, *args[1:], **kw))
    # the data lives in (pageable) host memory: a blocking host-to-device copy
    return _h2d(func(data, *args[1:], **kw), None, False, func.__name__)


def _as_tensor(mode: _EmuMode, func: Any, args: tuple, kwargs: dict) -> Any:
    # as_tensor(data, dtype=None, device=None) also takes its dtype and device by position
    names = ("data", "dtype", "device")
    kw = {**dict(zip(names[1:], args[1:])), **kwargs}
    if "device" in kw or "pin_memory" in kw:
        return _factory(mode, func, args[:1], kw)
    return func(*args, **kwargs)


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
        capture.wait(kind, "one_hot")
    return EmuTensor(func(labels._elem, num_classes))


_any_autocast = torch._C._is_any_autocast_enabled


def _describe(func: Any) -> tuple[str, str, Handler | None]:
    """(name, the op name events take, its handler) of a torch function, worked out once."""
    name = getattr(func, "__name__", "")
    op = name.strip("_") if name.startswith("__") else name
    return name, op, _HANDLERS.get(name)


_SEEN: dict[Any, tuple[str, str, Handler | None]] = {}
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
    "as_tensor": _as_tensor,
    "one_hot": _one_hot,
}


# ---- the process's emulated device --------------------------------------------------------


def _has_torch_function(relevant_args: Any) -> bool:
    """`torch.overrides.has_torch_function` as the program would get it on CUDA: the emulated
    device's own function mode is not there (nn's transformer fast paths are gated on it)."""
    if len(_function_modes()) > STATE.emulated:  # a mode of the program's own
        return True
    return any(_overrides(type(a)) for a in relevant_args)


def _overrides(cls: type) -> bool:
    impl = getattr(cls, "__torch_function__", None)
    return cls is not torch.Tensor and impl is not None and impl is not _disabled_impl


_disabled_impl = torch._C._disabled_torch_function_impl
_function_modes = torch.overrides._get_current_function_mode_stack
_plain_has_torch_function = torch.overrides.has_torch_function
_LOCK = threading.Lock()
_DEPTH = 0
_SAVED_DYNAMO: tuple[str | None, bool | None] | None = None
_bootstrap_inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]


@contextmanager
def _on_this_thread(claim: bool) -> Iterator[None]:
    STATE.emulated += 1
    try:
        with _EmuMode(claim):
            yield
    finally:
        STATE.emulated -= 1


def _thread_bootstrap(self: threading.Thread) -> None:
    if not _DEPTH:  # the device ended before this thread started
        return _bootstrap_inner(self)
    with _on_this_thread(CLAIM.cuda):
        return _bootstrap_inner(self)


def _disable_dynamo() -> tuple[str | None, bool | None]:
    saved_env = os.environ.get(_DYNAMO_ENV)
    os.environ[_DYNAMO_ENV] = "1"  # for a Dynamo imported while the device is active
    config = sys.modules.get("torch._dynamo.config")
    saved = None if config is None else config.disable  # type: ignore[attr-defined]
    if config is not None:
        config.disable = True  # type: ignore[attr-defined]
    return saved_env, saved


def _restore_dynamo(saved: tuple[str | None, bool | None]) -> None:
    saved_env, saved_flag = saved
    if saved_env is None:
        os.environ.pop(_DYNAMO_ENV, None)
    else:
        os.environ[_DYNAMO_ENV] = saved_env
    config = sys.modules.get("torch._dynamo.config")
    if config is not None:
        config.disable = bool(saved_flag) if saved_flag is not None else saved_env == "1"  # type: ignore[attr-defined]


def _start() -> None:
    """The outermost emulated device of the process begins."""
    global _SAVED_DYNAMO
    factories.install(cuda_too=False)
    _SAVED_DYNAMO = _disable_dynamo()
    threading.Thread._bootstrap_inner = _thread_bootstrap  # type: ignore[attr-defined]
    torch.overrides.has_torch_function = _has_torch_function


def _claim() -> None:
    """From now until the last emulated device ends, code that says "cuda" runs on it."""
    cuda_api.install()
    triton_launch.install()
    CLAIM.cuda = True
    factories.install(cuda_too=not cuda_present())


def _stop() -> None:
    """The last emulated device of the process ends."""
    global _SAVED_DYNAMO
    threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
    torch.overrides.has_torch_function = _plain_has_torch_function
    if _SAVED_DYNAMO is not None:
        _restore_dynamo(_SAVED_DYNAMO)
        _SAVED_DYNAMO = None
    factories.uninstall()
    if CLAIM.cuda:
        CLAIM.cuda = False
        cuda_api.uninstall()
        triton_launch.uninstall()
    pinned.clear()


@contextmanager
def emulated_device(claim_cuda: bool = True) -> Iterator[torch.device]:
    """Run CUDA-style code on the CPU; yields the device handle to use for device tensors.

    `claim_cuda` (the default, on every machine): code that says `"cuda"` runs on the emulated
    device, its tensors read `cuda:0` to Python, and `torch.cuda`'s device queries, streams,
    events, synchronize and empty_cache are emulated (process-wide) while any emulated device is
    active, so a run counts the same syncs on a machine with a GPU as without one. False leaves
    `"cuda"` and `torch.cuda` to the GPU, for checks that run both in one process. Threads
    started while it is active run on it too.
    """
    global _DEPTH
    with _LOCK:
        _DEPTH += 1
        if _DEPTH == 1:
            _start()
        if claim_cuda and not CLAIM.cuda:
            _claim()
    try:
        with _on_this_thread(claim_cuda):
            yield EMU_DEVICE
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                _stop()


def emulated_device_beside_gpu() -> AbstractContextManager[torch.device]:
    """The emulated device for a process that also runs on the GPU: where a CUDA device is
    present, `"cuda"` and `torch.cuda` stay the GPU's; without one it claims them as usual."""
    return emulated_device(claim_cuda=not cuda_present())
