"""The emulated caching allocator: what `torch.cuda.empty_cache()` would hand back, and what
`memory_allocated` reports.

Modelled: CUDA's caching allocator keeps every freed block reserved until `empty_cache`, which
returns them with `cudaFree` (the host waits). So here every emulated-device allocation freed
since the last `empty_cache` is a cached block, and `empty_cache` is a sync exactly when there is
one. An allocation is a storage; it is freed when the last tensor on it (base or view) is gone.
Not modelled: segments. CUDA returns a block only once its whole segment is free, so the
emulated device can call an `empty_cache` a sync where CUDA finds nothing to return.
"""

from __future__ import annotations

import weakref

import torch


class _Storage(weakref.ref):
    """A weak reference to the storage of emulated tensors: an allocation of `nbytes`."""

    __slots__ = ("address", "nbytes")
    address: int
    nbytes: int


# An allocation is a storage, freed when the last tensor on it (its base or any view) is gone.
# PyTorch keeps a storage's Python object exactly that long once one was made, so a weak
# reference to it sees the free. A view is told by its storage, not by `_base`: the views an op
# makes inside the wrapper's dispatch have none.
_storage_address = torch._C._storage_address  # the StorageImpl's, unique while it lives
# storage address -> the reference to its (live) storage
_live: dict[int, _Storage] = {}
# Freed allocations not yet counted. Their references' callback is this list's append, a C
# function, so a free runs no Python code: CPython runs a pending Ctrl-C's handler at the next
# bytecode, and drops an exception raised in a weakref callback (the program would never see it).
# They are counted before any new storage is looked up, so an address reused is a new storage.
_freed: list[_Storage] = []
_on_free = _freed.append
_cached_bytes = 0
_live_bytes = 0
_peak_bytes = 0
_allocations = 0  # ever made, as CUDA's allocator counts them ("allocation.all.allocated")


def _count_frees() -> None:
    global _cached_bytes, _live_bytes
    while _freed:
        ref = _freed.pop()
        del _live[ref.address]
        _cached_bytes += ref.nbytes
        _live_bytes -= ref.nbytes


def track(elem: torch.Tensor) -> None:
    """Note a new emulated tensor: its storage is allocated with the first tensor on it."""
    global _live_bytes, _peak_bytes, _allocations
    if _freed:
        _count_frees()
    address = _storage_address(elem)
    if address in _live:
        return
    _allocations += 1
    storage = elem.untyped_storage()
    ref = _live[address] = _Storage(storage, _on_free)
    ref.address = address
    ref.nbytes = storage.nbytes()
    _live_bytes += ref.nbytes
    if _live_bytes > _peak_bytes:
        _peak_bytes = _live_bytes


def release() -> int:
    """Return the cached bytes to the (emulated) driver; how many there were."""
    global _cached_bytes
    _count_frees()
    released, _cached_bytes = _cached_bytes, 0
    return released


def allocated_bytes() -> int:
    _count_frees()
    return _live_bytes


def reserved_bytes() -> int:
    _count_frees()
    return _live_bytes + _cached_bytes


def allocations() -> int:
    """How many allocations the emulated device has made in this process."""
    return _allocations


def peak_bytes() -> int:
    return _peak_bytes


def reset_peak() -> None:
    global _peak_bytes
    _count_frees()
    _peak_bytes = _live_bytes
