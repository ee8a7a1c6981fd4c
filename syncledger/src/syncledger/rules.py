"""When the host waits: pure classification rules shared by the CUDA interceptors and the
emulated device (one implementation of each rule, unit-tested without a GPU).

The rules follow what the host did on an H200 (driver 580, torch 2.11) with a long sleep kernel
queued first (the harness's `check sync` measures them again):

- a blocking copy either way waits; so does any copy whose host side is pageable, except a
  `non_blocking` host-to-device copy of at most the driver's staging size, which the driver
  stages and returns from at once (a hazard, not a sync);
- a non-contiguous pinned host tensor is staged through a pageable temporary, so it counts as
  pageable;
- a copy of zero bytes never waits;
- `empty_cache` waits only when it returns cached blocks to the driver.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from syncledger.events import SyncKind

# The largest pageable non_blocking host-to-device copy that returned at once on the H200
# (2 MiB did, 2 MiB + 4 KiB waited).
H200_STAGING_BYTES = 2 << 20
_ENV_STAGING = "SYNCLEDGER_PAGEABLE_STAGING_BYTES"


def _staging_from_env() -> int:
    raw = os.environ.get(_ENV_STAGING)
    if raw is None:
        return H200_STAGING_BYTES
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError(
            f"environment variable {_ENV_STAGING}={raw[:40]!r}: expected a number of bytes "
            f"(e.g. {H200_STAGING_BYTES}, the H200's)"
        )
    return int(raw)


# Read from the environment at the first use, not at import: a bad value must not break
# programs (or commands) that never classify a copy.
_staging_bytes: int | None = None


def pageable_staging_bytes() -> int:
    """The size up to which a pageable non_blocking host-to-device copy returns at once
    (ValueError naming the variable when SYNCLEDGER_PAGEABLE_STAGING_BYTES is not a number)."""
    global _staging_bytes
    if _staging_bytes is None:
        _staging_bytes = _staging_from_env()
    return _staging_bytes


def set_pageable_staging_bytes(nbytes: int) -> None:
    """Use the staging size measured on this machine (`make gpu-check` prints it); the
    environment variable SYNCLEDGER_PAGEABLE_STAGING_BYTES sets it for a whole process."""
    global _staging_bytes
    if not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"staging size must be a non-negative int of bytes, got {nbytes!r}")
    _staging_bytes = nbytes


@dataclass(frozen=True)
class HostMemory:
    """The host side of a copy: only contiguous pinned memory is copied without staging."""

    pinned: bool
    contiguous: bool = True

    @property
    def direct(self) -> bool:
        return self.pinned and self.contiguous


def copy_host_memory(host: torch.Tensor, device_side: torch.Tensor, pinned: bool) -> HostMemory:
    """The host side of `dst.copy_(src)`: staged unless it is contiguous and needs no broadcast."""
    return HostMemory(pinned, host.is_contiguous() and host.shape == device_side.shape)


def classify_h2d(nbytes: int, non_blocking: bool, src: HostMemory) -> SyncKind | None:
    """A host-to-device copy of `nbytes` from `src`."""
    if nbytes == 0:
        return None
    if not non_blocking:
        return SyncKind.H2D_BLOCKING
    if src.direct:
        return None
    if nbytes <= pageable_staging_bytes():
        return SyncKind.PAGEABLE_STAGED
    return SyncKind.PAGEABLE_ASYNC


def classify_d2h(nbytes: int, non_blocking: bool, dst: HostMemory) -> SyncKind | None:
    """A device-to-host copy of `nbytes` into `dst`: only non_blocking into direct memory
    leaves the host free (the data are valid only after a later sync)."""
    if nbytes == 0:
        return None
    if not non_blocking:
        return SyncKind.D2H_READ
    return None if dst.direct else SyncKind.PAGEABLE_ASYNC


# Kernels that wait where PyTorch's sync debug mode cannot see it (thrust and cuSOLVER synchronize
# by themselves): how many times the host waits in all, as the blocking oracle counted on the
# H200 (catalogue cases unique_dim and linalg_eigh). The CUDA interceptors record these counts
# for the call; the emulated device for the aten op (`unique_dim`, `_linalg_eigh`).
UNIQUE_DIM_WAITS = 3
LINALG_EIGH_WAITS = 2


def classify_empty_cache(released_bytes: int) -> SyncKind | None:
    """`empty_cache` frees device memory (cudaFree synchronizes) only when blocks were cached."""
    return SyncKind.ALLOCATOR if released_bytes > 0 else None


# ---- advanced indexing ------------------------------------------------------------------------
# What `index` and `index_put_` do with their arguments on CUDA: a boolean mask on the device is
# turned into indices by `nonzero` (the host reads the count); an integer index on the host is
# copied to the device with a blocking copy; a boolean mask on the host is turned into indices
# on the host, into pinned memory, and copied without waiting.


@dataclass(frozen=True)
class IndexArg:
    """One tensor index: where it lives and whether it is a boolean (or uint8) mask."""

    on_device: bool
    is_mask: bool


_MASK_DTYPES = (torch.bool, torch.uint8)
# the four kinds of tensor index, made once: a rule runs on every indexing op
_INDEX_ARGS = {
    (on_device, is_mask): IndexArg(on_device, is_mask)
    for on_device in (False, True)
    for is_mask in (False, True)
}


def index_arg(on_device: bool, dtype: torch.dtype) -> IndexArg:
    """The index argument of a tensor index of `dtype`, on the device or the host."""
    return _INDEX_ARGS[on_device, dtype in _MASK_DTYPES]


@dataclass(frozen=True)
class ValueArg:
    """The value of an index assignment (a Python number is a host scalar)."""

    on_device: bool
    numel: int = 1
    ndim: int = 0


def _index_arg_kinds(index: IndexArg) -> list[SyncKind]:
    if index.is_mask:
        return [SyncKind.D2H_READ] if index.on_device else []
    return [] if index.on_device else [SyncKind.H2D_BLOCKING]


def index_kinds(indices: Sequence[IndexArg | None]) -> list[SyncKind]:
    """`t[indices]` (aten `index`): the waits its tensor indices cause."""
    return [k for i in indices if i is not None for k in _index_arg_kinds(i)]


def _masked_fill_path(indices: Sequence[IndexArg | None], value: ValueArg) -> bool:
    # index_put_ becomes `masked_fill_(mask, value.item())` for one device mask and a host scalar
    tensors = [i for i in indices if i is not None]
    return (
        not value.on_device
        and value.numel == 1
        and len(tensors) == 1
        and tensors[0].is_mask
        and tensors[0].on_device
    )


def index_put_kinds(
    indices: Sequence[IndexArg | None], value: ValueArg, accumulate: bool
) -> list[SyncKind]:
    """`t[indices] = value` (aten `index_put_`): the waits it causes."""
    if not accumulate and _masked_fill_path(indices, value):
        return []
    moved = [SyncKind.H2D_BLOCKING] if not value.on_device and value.ndim == 0 else []
    return moved + index_kinds(indices)


def masked_fill_kinds(value: ValueArg) -> list[SyncKind]:
    """`masked_fill_(mask, value)`: a device scalar tensor is read on the host first."""
    return [SyncKind.D2H_READ] if value.on_device else []


def basic_setitem_kinds(target_ndim: int, value: ValueArg) -> list[SyncKind]:
    """`t[ints/slices] = value`: a host value is copied in (blocking), except a host scalar
    written over a view of one or more dimensions, which is a fill with a host number."""
    if value.on_device or value.numel == 0:
        return []
    if value.ndim == 0 and target_ndim > 0:
        return []
    return [SyncKind.H2D_BLOCKING]


# ---- Python indexing (`t[index]`, `t[index] = value`) onto the rules above ----------------------


def _as_parts(index: object) -> tuple[object, ...]:
    # as torch does: a tuple indexes several dimensions; a list is one index tensor unless it
    # holds tensors, sequences, slices, None or Ellipsis
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and any(
        isinstance(p, (torch.Tensor, list, tuple, slice)) or p is None or p is Ellipsis
        for p in index
    ):
        return tuple(index)
    return (index,)


def _describe(index: object, ndim: int) -> tuple[list[IndexArg], int]:
    """The tensor indices of a Python index, and the dimensions left by its basic part."""
    tensors: list[IndexArg] = []
    kept = ndim
    for part in _as_parts(index):
        if isinstance(part, torch.Tensor):
            on_device = part.device.type != "cpu"
            tensors.append(index_arg(on_device, part.dtype))
        elif isinstance(part, list):
            tensors.append(IndexArg(on_device=False, is_mask=False))  # becomes a host tensor
        elif part is None:
            kept += 1
        elif isinstance(part, int) and not isinstance(part, bool):
            kept -= 1
    return tensors, kept


def value_arg(value: object) -> ValueArg:
    """Describe an assigned value; a Python number is a host scalar."""
    if isinstance(value, torch.Tensor):
        return ValueArg(value.device.type != "cpu", value.numel(), value.dim())
    return ValueArg(on_device=False)


def getitem_kinds(index: object, ndim: int) -> list[SyncKind]:
    """The waits of `t[index]` for a device tensor `t` of `ndim` dimensions."""
    tensors, _kept = _describe(index, ndim)
    return index_kinds(tensors)


def setitem_kinds(index: object, ndim: int, value: object) -> list[SyncKind]:
    """The waits of `t[index] = value` for a device tensor `t` of `ndim` dimensions."""
    tensors, kept = _describe(index, ndim)
    if tensors:
        return index_put_kinds(tensors, value_arg(value), accumulate=False)
    return basic_setitem_kinds(kept, value_arg(value))
