"""The emulated caching allocator: what `torch.cuda.empty_cache()` would hand back.

Modelled: CUDA's caching allocator keeps every freed block reserved until `empty_cache`, which
returns them with `cudaFree` (the host waits). So here every emulated-device allocation freed
since the last `empty_cache` is a cached block, and `empty_cache` is a sync exactly when there is
one. An allocation is a tensor that is not a view; it is freed when it and its views are gone.
Not modelled: segments. CUDA returns a block only once its whole segment is free, so the
emulated device can call an `empty_cache` a sync where CUDA finds nothing to return.
"""

from __future__ import annotations

import weakref
from functools import partial

import torch

_live: set[weakref.ref[torch.Tensor]] = set()  # the refs must live for their callbacks to run
_cached_bytes = 0


def _freed(nbytes: int, ref: weakref.ref[torch.Tensor]) -> None:
    global _cached_bytes
    _live.discard(ref)
    _cached_bytes += nbytes


def track(elem: torch.Tensor) -> None:
    """Note a new emulated tensor's values; a view's belong to its base, already noted."""
    if elem._base is None:
        _live.add(weakref.ref(elem, partial(_freed, elem.nbytes)))


def release() -> int:
    """Return the cached bytes to the (emulated) driver; how many there were."""
    global _cached_bytes
    released, _cached_bytes = _cached_bytes, 0
    return released
