"""The emulated device: CUDA-style code on a CPU-only machine, with every sync classified.

Device tensors are CPU tensors wrapped in `EmuTensor`, a wrapper subclass whose reported device
is `meta` (a subclass claiming `cuda` fails on CPU-only builds). Values are real, so code that
branches on data behaves as on the GPU. A torch-function mode routes factories and host-to-device
copies onto the wrapper and tracks pinned host memory; the wrapper's dispatch classifies
device-to-host reads, data-dependent shapes and copies by the same rules as on CUDA.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from harness.sync import emulated_cuda, pinned
from harness.sync.events import SyncKind
from harness.sync.record import record_sync
from harness.sync.rules import FRIENDLY_OPS, classify_d2h, classify_h2d
from harness.sync.state import STATE

EMU_DEVICE = torch.device("meta")
aten = torch.ops.aten


class EmulationError(RuntimeError):
    """Misuse of the emulated device (mixing with real CUDA tensors, device mismatches)."""


class EmuTensor(torch.Tensor):
    """A tensor on the emulated device: metadata says `meta`, `_elem` holds the real CPU values."""

    _elem: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> EmuTensor:
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape,
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=EMU_DEVICE,
            requires_grad=elem.requires_grad,
        )
        r._elem = elem
        return r

    def __repr__(self, *, tensor_contents: object = None) -> str:
        return f"EmuTensor({self._elem!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[override]
        return _dispatch(func, args, kwargs or {})


def is_emulated(x: torch.Tensor | torch.device | str | None) -> bool:
    """True for tensors and devices of the emulated device."""
    if isinstance(x, torch.Tensor):
        return isinstance(x, EmuTensor)
    if x is None:
        return False
    return torch.device(x).type == "meta"


def host_values(t: torch.Tensor) -> torch.Tensor:
    """The CPU tensor behind an emulated tensor, without recording a sync (for checks only)."""
    return t._elem if isinstance(t, EmuTensor) else t


def _wrap(x: Any) -> Any:
    return EmuTensor(x) if isinstance(x, torch.Tensor) and not isinstance(x, EmuTensor) else x


def _unwrap(x: Any) -> Any:
    if isinstance(x, EmuTensor):
        return x._elem
    if isinstance(x, torch.device) and x.type == "meta":
        return torch.device("cpu")
    return x


# ---- dispatch: what each aten op costs on a real GPU --------------------------------------


def _bool_index(indices: Any) -> bool:
    return any(
        isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ()
    )


def _index_put_waits(a: tuple, k: dict) -> bool:
    indices = a[1] if len(a) > 1 else k.get("indices")
    value = a[2] if len(a) > 2 else k.get("values")
    accumulate = bool(a[3] if len(a) > 3 else k.get("accumulate", False))
    # `t[mask] = scalar` takes index_put's masked_fill fast path: no nonzero, no wait
    # (zero runtime syncs under the profiler on an H200, torch 2.11)
    if (
        not accumulate
        and len(indices or ()) == 1
        and isinstance(value, torch.Tensor)
        and value.numel() == 1
    ):
        return False
    return _bool_index(indices)


# op -> how many times this call makes the host wait for the device (0: it does not)
_D2H_RULES: dict[Any, Callable[[tuple, dict], int]] = {
    aten._local_scalar_dense.default: lambda a, k: True,
    aten.is_nonzero.default: lambda a, k: True,
    aten.equal.default: lambda a, k: True,
    aten.nonzero.default: lambda a, k: True,
    aten.masked_select.default: lambda a, k: True,
    aten._unique2.default: lambda a, k: True,
    aten.unique_dim.default: lambda a, k: True,
    aten.unique_consecutive.default: lambda a, k: True,
    aten.bincount.default: lambda a, k: True,
    # without output_size CUDA reads the total and checks `(repeats >= 0).all()`: two waits
    # (two cudaStreamSynchronize calls seen under the profiler on an H200, torch 2.11)
    aten.repeat_interleave.Tensor: lambda a, k: 2 if k.get("output_size") is None else 0,
    aten.index.Tensor: lambda a, k: _bool_index(a[1] if len(a) > 1 else k.get("indices")),
    aten.index_put_.default: lambda a, k: _index_put_waits(a, k),
    aten.index_put.default: lambda a, k: _index_put_waits(a, k),
}

# ops that may legitimately take host tensors next to device tensors
_HOST_ARGS_OK = frozenset(
    {
        aten.copy_.default,
        aten._to_copy.default,
        aten.index.Tensor,
        aten.index_put_.default,
        aten.index_put.default,
        aten.lift_fresh.default,
    }
)


def _check_devices(func: Any, flat: list[Any]) -> None:
    for x in flat:
        if not isinstance(x, torch.Tensor) or isinstance(x, EmuTensor):
            continue
        if x.device.type == "cuda":
            raise EmulationError(
                f"{func}: emulated-device tensors cannot be mixed with real CUDA tensors"
            )
        if x.device.type == "cpu" and x.dim() > 0 and func not in _HOST_ARGS_OK:
            raise EmulationError(
                f"{func}: expected all tensors on the same device, got the emulated device and "
                f"a host tensor of shape {tuple(x.shape)} (this would fail on a GPU)"
            )


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _map(fn: Callable[[Any], Any], x: Any) -> Any:
    # aten arguments and results nest at most one level (Tensor[] / tuples of tensors)
    if isinstance(x, (list, tuple)):
        return type(x)(fn(y) for y in x)
    return fn(x)


def _dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    flat = [*args, *kwargs.values()]
    flat += [y for x in flat if isinstance(x, (list, tuple)) for y in x]
    _check_devices(func, flat)
    if func is aten.copy_.default:
        return _copy(args, kwargs)
    if func is aten._to_copy.default:
        return _to_copy(args, kwargs)
    uargs = tuple(_map(_unwrap, a) for a in args)
    ukwargs = {k: _map(_unwrap, v) for k, v in kwargs.items()}
    rule = _D2H_RULES.get(func)
    for _ in range(rule(uargs, ukwargs) if rule is not None else 0):
        record_sync(SyncKind.D2H_READ, func.overloadpacket.__name__)
    out = func(*uargs, **ukwargs)
    # in-place ops and ops returning an input return the caller's own wrapper
    by_id = {id(u): a for u, a in zip(uargs, args) if isinstance(a, EmuTensor)}
    return _map(lambda x: _rewrap(x, by_id), out)


def _rewrap(x: Any, by_id: dict[int, EmuTensor]) -> Any:
    own = by_id.get(id(x))
    return own if own is not None else _wrap(x)


def _to_copy(args: tuple, kwargs: dict) -> torch.Tensor:
    src = args[0]
    device = kwargs.get("device")
    non_blocking = bool(kwargs.get("non_blocking", False))
    ukwargs = {k: _unwrap(v) for k, v in kwargs.items() if k != "non_blocking"}
    out = aten._to_copy.default(src._elem, **ukwargs)
    if device is not None and torch.device(device).type == "cpu":
        # like CUDA, a non_blocking copy to the host lands in pinned memory
        if non_blocking:
            out = pinned.pin(out)
        kind = classify_d2h(non_blocking, dst_pinned=non_blocking)
        if kind is not None:
            record_sync(kind, "_to_copy", _nbytes(out))
        return out
    return EmuTensor(out)


def _copy(args: tuple, kwargs: dict) -> torch.Tensor:
    dst, src = args[0], args[1]
    non_blocking = bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
    d_dev, s_dev = isinstance(dst, EmuTensor), isinstance(src, EmuTensor)
    if d_dev and not s_dev and isinstance(src, torch.Tensor) and src.device.type == "cpu":
        kind = classify_h2d(non_blocking, pinned.is_pinned(src))
    elif s_dev and not d_dev:
        kind = classify_d2h(non_blocking, pinned.is_pinned(dst))
    else:
        kind = None
    if isinstance(src, torch.Tensor) and not s_dev and src.device.type == "meta":
        raise EmulationError(
            "copy_ from a plain meta tensor: a value was made on the meta device directly "
            "instead of through the emulated device, so it holds no data"
        )
    host_dst = dst._elem if d_dev else dst
    host_dst.copy_(src._elem if s_dev else src)
    if kind is not None:
        record_sync(kind, "copy_", _nbytes(host_dst))
    return dst


# ---- torch-function mode: factories, H2D copies, pinned memory ------------------------------


def _wants_emu(device: Any) -> bool:
    if device is None:
        return False
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    # code that says "cuda" runs on the emulated device when no GPU is present
    return dev.type == "meta" or (dev.type == "cuda" and not torch.cuda.is_available())


def _h2d(src: torch.Tensor, dtype: torch.dtype | None, non_blocking: bool, op: str) -> EmuTensor:
    kind = classify_h2d(non_blocking, pinned.is_pinned(src))
    out = src.to(dtype=dtype, copy=True) if dtype is not None else src.clone()
    if kind is not None:
        record_sync(kind, op, _nbytes(out))
    return EmuTensor(out)


def _tensor_to(func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    device, dtype, non_blocking, _fmt = torch._C._nn._parse_to(*args[1:], **kwargs)
    if not isinstance(self, EmuTensor) and _wants_emu(device):
        return _h2d(self, dtype, non_blocking, "to")
    if isinstance(self, EmuTensor) and _wants_emu(device):
        return self if dtype in (None, self.dtype) else func(self, dtype=dtype)
    return func(*args, **kwargs)


def _tensor_cuda(func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if isinstance(self, EmuTensor):
        return self
    return _h2d(self, None, bool(kwargs.get("non_blocking", False)), "cuda")


def _tolist(func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if isinstance(self, EmuTensor):
        record_sync(SyncKind.D2H_READ, "tolist", _nbytes(self._elem))
        return self._elem.tolist()
    return func(*args, **kwargs)


def _numpy(func: Any, args: tuple, kwargs: dict) -> Any:
    if isinstance(args[0], EmuTensor):
        raise TypeError(
            "can't convert an emulated-device tensor to numpy; copy it to the host with .cpu()"
        )
    return func(*args, **kwargs)


def _pin_memory(func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if isinstance(self, EmuTensor):
        raise EmulationError("cannot pin a device tensor: only host tensors can be pinned")
    return pinned.pin(self.clone())


def _is_pinned(func: Any, args: tuple, kwargs: dict) -> bool:
    return (not isinstance(args[0], EmuTensor)) and pinned.is_pinned(args[0])


def _record_stream(func: Any, args: tuple, kwargs: dict) -> None:
    return None


def _new_tensor(func: Any, args: tuple, kwargs: dict) -> Any:
    self = args[0]
    if not isinstance(self, EmuTensor):
        return func(*args, **kwargs)
    kw = dict(kwargs)
    kw.setdefault("dtype", self.dtype)
    kw.pop("device", None)
    data = torch.tensor(args[1], **kw)
    return _h2d(data, None, False, "new_tensor")


def _factory(func: Any, args: tuple, kwargs: dict) -> Any:
    """Any call with device=/pin_memory= keyword arguments."""
    kw = dict(kwargs)
    pin = bool(kw.pop("pin_memory", False))
    if not _wants_emu(kw.get("device")):
        out = func(*args, **kw)
        return pinned.pin(out) if pin and isinstance(out, torch.Tensor) else out
    kw["device"] = torch.device("cpu")
    if getattr(func, "__name__", "") in ("tensor", "as_tensor", "asarray"):
        data = args[0] if args else kw.pop("data")
        src = data._elem if isinstance(data, EmuTensor) else data
        out = func(src, *args[1:], **kw)
        if not isinstance(data, EmuTensor):
            # the data lives in (pageable) host memory: a blocking host-to-device copy
            record_sync(SyncKind.H2D_BLOCKING, func.__name__, _nbytes(out))
        return EmuTensor(out)
    return _map(_wrap, func(*args, **kw))


def _setitem(func: Any, args: tuple, kwargs: dict) -> Any:
    # `t[i] = 0` makes a scalar tensor on t's device; on `meta` it would hold no value, so
    # hand over an emulated 0-dim tensor (a device-to-device copy, no sync, as on CUDA)
    self, index, value = args
    if isinstance(self, EmuTensor) and isinstance(value, (int, float, bool)):
        value = EmuTensor(torch.tensor(value, dtype=self.dtype))
    return func(self, index, value, **kwargs)


def _where(func: Any, args: tuple, kwargs: dict) -> Any:
    # where(cond, x, scalar) wraps the scalar on the operands' device; on `meta` its value
    # would be lost, so hand it over as a host 0-dim tensor (allowed next to device tensors)
    fixed = tuple(torch.tensor(a) if isinstance(a, (int, float, bool)) else a for a in args)
    return func(*fixed, **kwargs)


# by name: on a GPU machine the CUDA interceptors may have replaced these with wrappers
_HANDLERS: dict[str, Callable[[Any, tuple, dict], Any]] = {
    "where": _where,
    "__setitem__": _setitem,
    "to": _tensor_to,
    "cuda": _tensor_cuda,
    "tolist": _tolist,
    "numpy": _numpy,
    "__array__": _numpy,
    "pin_memory": _pin_memory,
    "is_pinned": _is_pinned,
    "record_stream": _record_stream,
    "new_tensor": _new_tensor,
}


class _EmuMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        outer = STATE.op is None and name in FRIENDLY_OPS
        if outer:
            STATE.op = name.strip("_") if name.startswith("__") else name
        try:
            handler = _HANDLERS.get(name)
            if handler is not None:
                return handler(func, args, kwargs)
            if "device" in kwargs or "pin_memory" in kwargs:
                return _factory(func, args, kwargs)
            return func(*args, **kwargs)
        finally:
            if outer:
                STATE.op = None


_LOCK = threading.Lock()
_DEPTH = 0


@contextmanager
def emulated_device() -> Iterator[torch.device]:
    """Run CUDA-style code on the CPU; yields the device handle to use for device tensors.

    While active, `torch.cuda.Stream/Event/stream/current_stream/synchronize/empty_cache` are
    emulated (process-wide), and factories/copies on this thread go to the emulated device.
    """
    global _DEPTH
    with _LOCK:
        _DEPTH += 1
        if _DEPTH == 1:
            emulated_cuda.install()
    mode = _EmuMode()
    try:
        with mode:
            yield EMU_DEVICE
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                emulated_cuda.uninstall()
                pinned.clear()
