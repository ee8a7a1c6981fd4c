"""`EmuTensor`: a tensor on the emulated device, and the host reads that bypass aten.

To PyTorch's C++ side it is a `meta` tensor (one whose C++ device is `cuda` fails on CPU-only
builds: autograd and device guards look for a CUDA runtime); `_elem` holds the real CPU values.
To Python code it is what it stands for: while the emulated device claims `"cuda"` (the default
without a GPU) its `.device` reads `cuda:0` and `is_cuda` True, so code that branches on either
(transformers, torch.amp, `torch.testing.assert_close`) takes its CUDA path; otherwise it reads
`meta`. Every aten op on it goes through one door (`syncledger.emulated.door`). The few ways
Python reads device data without an aten op — `tolist`, `repr`/`print`, formatting, numpy — are
overridden here so that they are device-to-host reads too, as on CUDA.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import _tensor_str

from syncledger.emulated import cache
from syncledger.emulated.capture import wait
from syncledger.events import SyncKind
from syncledger.state import STATE

EMU_DEVICE = torch.device("meta")
CLAIMED_DEVICE = torch.device("cuda", 0)


class _Claim:
    """Whether emulated tensors tell Python they are on `cuda:0` (set while claiming)."""

    cuda = False


CLAIM = _Claim()


def reported_device() -> torch.device:
    """The device Python code sees for emulated tensors now."""
    return CLAIMED_DEVICE if CLAIM.cuda else EMU_DEVICE


_DEFAULT_DTYPES = (torch.int64, torch.float32, torch.bool)  # repr names any other dtype


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class EmulationError(RuntimeError):
    """Misuse of the emulated device (mixing with real CUDA tensors, device mismatches)."""


def _named(op: str, read: Callable[[], Any]) -> Any:
    """Run `read` with `op` naming the syncs it records (unless an outer call named them)."""
    if STATE.op is not None:
        return read()
    STATE.op = op
    try:
        return read()
    finally:
        STATE.op = None


class EmuTensor(torch.Tensor):
    """A tensor on the emulated device: metadata says `meta`, `_elem` holds the real CPU values."""

    _elem: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl
    # the aten door, set by syncledger.emulated.door (which needs this class first)
    door: ClassVar[Callable[[Any, tuple, dict], Any]]

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> EmuTensor:
        if elem.is_nested:
            return _nested(cls, elem)
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
        cache.track(elem)
        return r

    @classmethod
    def __torch_dispatch__(cls, func, _types, args=(), kwargs=None):  # type: ignore[override]
        return cls.door(func, args, kwargs or {})

    # ---- what Python code sees of the device (C++ keeps `meta`) -----------------------------
    @property
    def is_nested(self) -> bool:  # type: ignore[override]
        return self._elem.is_nested

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return CLAIMED_DEVICE if CLAIM.cuda else EMU_DEVICE

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return CLAIM.cuda

    @property
    def is_meta(self) -> bool:  # type: ignore[override]
        return not CLAIM.cuda

    def get_device(self) -> int:
        return 0 if CLAIM.cuda else -1

    def data_ptr(self) -> int:
        # where the values are, so code that compares addresses (make_graphed_callables copies
        # an input into its static one unless they are the same memory) sees what CUDA shows
        return self._elem.data_ptr()

    def __deepcopy__(self, memo: dict[int, Any]) -> EmuTensor:
        out = EmuTensor(copy.deepcopy(self._elem.detach(), memo))
        out.requires_grad_(self.requires_grad)
        memo[id(self)] = out
        return out

    # A traceable wrapper subclass (these two methods): `Module.to`/`.cuda` swaps the moved value
    # into each parameter's own object (torch.utils.swap_tensors), as `param.data = moved` does on
    # CUDA, so a weight two modules share (GPT-2's tied embedding) stays one tensor, moved once.
    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["_elem"], None

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], meta: None, outer_size: Any, outer_stride: Any
    ) -> EmuTensor:
        return EmuTensor(inner["_elem"])

    def __reduce_ex__(self, protocol: Any) -> Any:
        # pickling (torch.save, a multiprocessing queue) carries the values, as CUDA's does
        return (_rebuild, (self._elem.detach(), self.requires_grad))

    # ---- host reads that do not go through an aten op -------------------------------------
    def tolist(self) -> Any:
        def read() -> Any:
            wait(SyncKind.D2H_READ, "tolist", nbytes(self._elem))
            return self._elem.tolist()

        return _named("tolist", read)

    def __repr__(self, **_: object) -> str:
        # torch's own formatting, run on the device tensor: it reads each value it shows on the
        # host (per element, then `tolist`), exactly as for a CUDA tensor
        def read() -> str:
            body = _tensor_str._tensor_str(self, len("tensor("))
            dtype = "" if self.dtype in _DEFAULT_DTYPES else f", dtype={self.dtype}"
            return f"tensor({body}, device='emulated'{dtype})"

        return _named("repr", read)

    def __format__(self, format_spec: str) -> str:
        if self.dim() != 0:
            return object.__format__(self, format_spec)
        return _named("format", lambda: self.item().__format__(format_spec))

    def numpy(self, **_: object) -> Any:
        raise TypeError(
            "can't convert an emulated-device tensor to numpy (nor a CUDA one); "
            "copy it to the host with .cpu() first"
        )

    def __array__(self, *_: object, **__: object) -> Any:
        return self.numpy()


def _nested(cls: type[EmuTensor], elem: torch.Tensor) -> EmuTensor:
    # A nested tensor (nn's transformer fast path makes one from a padding mask) has no sizes of
    # its own: its device tensor takes the padded shape, and its ops (nested kernels) run on it
    # through the door like any other.
    padded = (elem.size(0), *elem._nested_tensor_size().amax(0).tolist())
    r = torch.Tensor._make_wrapper_subclass(
        cls, padded, dtype=elem.dtype, device=EMU_DEVICE, requires_grad=elem.requires_grad
    )
    r._elem = elem
    cache.track(elem)
    return r


def _rebuild(values: torch.Tensor, requires_grad: bool) -> EmuTensor:
    out = EmuTensor(values)
    return out.requires_grad_(requires_grad) if requires_grad else out


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
