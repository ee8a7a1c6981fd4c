"""The emulated caching allocator: what `torch.cuda.empty_cache()` would hand back, and what
`memory_allocated` reports.

Modelled: CUDA's caching allocator keeps every freed block reserved until `empty_cache`, which
returns them with `cudaFree` (the host waits). So here every emulated-device allocation freed
since the last `empty_cache` is a cached block, and `empty_cache` is a sync exactly when there is
one. An allocation is a tensor that is not a view; it is freed when it and its views are gone.
Not modelled: segments. CUDA returns a block only once its whole segment is free, so the
emulated device can call an `empty_cache` a sync where CUDA finds nothing to return.
"""

from __future__ import annotations

import weakref

import torch

# id(values) -> (the weak reference that reports the free, bytes): keyed by id, since two
# references to one tensor compare their referents (tensors) when they collide in a set
_live: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}
_cached_bytes = 0
_live_bytes = 0
_peak_bytes = 0


def _freed(key: int, ref: weakref.ref[torch.Tensor]) -> None:
    global _cached_bytes, _live_bytes
    entry = _live.get(key)
    if entry is None or entry[0] is not ref:
        return
    del _live[key]
    _cached_bytes += entry[1]
    _live_bytes -= entry[1]


def track(elem: torch.Tensor) -> None:
    """Note a new emulated tensor's values; a view's belong to its base, already noted, and
    values wrapped twice are noted once."""
    global _live_bytes, _peak_bytes
    if elem._base is not None:
        return
    key = id(elem)
    entry = _live.get(key)
    if entry is not None and entry[0]() is elem:
        return
    nbytes = elem.nbytes
    _live[key] = (weakref.ref(elem, lambda ref, key=key: _freed(key, ref)), nbytes)
    _live_bytes += nbytes
    _peak_bytes = max(_peak_bytes, _live_bytes)


def release() -> int:
    """Return the cached bytes to the (emulated) driver; how many there were."""
    global _cached_bytes
    released, _cached_bytes = _cached_bytes, 0
    return released


def allocated_bytes() -> int:
    return _live_bytes


def reserved_bytes() -> int:
    return _live_bytes + _cached_bytes


def peak_bytes() -> int:
    return _peak_bytes


def reset_peak() -> None:
    global _peak_bytes
    _peak_bytes = _live_bytes
