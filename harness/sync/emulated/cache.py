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

import itertools
import weakref

import torch


class _Values(weakref.ref):
    """A weak reference to an emulated tensor's values, naming the storage they live in."""

    __slots__ = ("number", "storage")
    number: int
    storage: int


# storage address -> [its bytes, the tracked tensors on it]: an allocation is a storage, freed
# when the last tensor on it (its base or any view) is. A view is told by its storage, not by
# `_base`: the views an op makes inside the wrapper's dispatch have none.
_live: dict[int, list[int]] = {}
# number -> the reference, kept until its free is counted. Keyed by a number of its own: two
# references to one tensor compare their referents (tensors) when they collide in a set, and
# id() raises an audit event, which the ledger's audit hook makes a Python call
_refs: dict[int, _Values] = {}
_numbers = itertools.count()
# Freed values not yet counted. Their references' callback is this list's append, a C function,
# so a free runs no Python code: CPython runs a pending Ctrl-C's handler at the next bytecode,
# and drops an exception raised in a weakref callback (the program would never see it).
_freed: list[_Values] = []
_on_free = _freed.append
_cached_bytes = 0
_live_bytes = 0
_peak_bytes = 0


def _count_frees() -> None:
    global _cached_bytes, _live_bytes
    while _freed:
        ref = _freed.pop()
        del _refs[ref.number]
        entry = _live[ref.storage]
        entry[1] -= 1
        if entry[1] == 0:
            del _live[ref.storage]
            _cached_bytes += entry[0]
            _live_bytes -= entry[0]


def track(elem: torch.Tensor) -> None:
    """Note a new emulated tensor: its storage is allocated with the first tensor on it."""
    global _live_bytes, _peak_bytes
    _count_frees()
    storage = elem.untyped_storage()
    key = storage.data_ptr()
    entry = _live.get(key)
    if entry is None:
        entry = _live[key] = [storage.nbytes(), 0]
        _live_bytes += entry[0]
        _peak_bytes = max(_peak_bytes, _live_bytes)
    entry[1] += 1
    ref = _Values(elem, _on_free)
    ref.storage = key
    ref.number = next(_numbers)
    _refs[ref.number] = ref


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


def peak_bytes() -> int:
    return _peak_bytes


def reset_peak() -> None:
    global _peak_bytes
    _count_frees()
    _peak_bytes = _live_bytes
