"""The emulated caching allocator: what `torch.cuda.empty_cache()` would hand back.

Modelled: CUDA's caching allocator keeps every freed block reserved until `empty_cache`, which
returns them with `cudaFree` (the host waits). So here every emulated-device storage freed since
the last `empty_cache` is a cached block, and `empty_cache` is a sync exactly when there is one.
Not modelled: segments. CUDA returns a block only once its whole segment is free, so the
emulated device can call an `empty_cache` a sync where CUDA finds nothing to return.
"""

from __future__ import annotations

import weakref
from functools import partial

import torch

_live: dict[int, weakref.ref[torch.UntypedStorage]] = {}  # id(storage) -> ref with a callback
_cached_bytes = 0


def _freed(key: int, nbytes: int, _ref: object) -> None:
    global _cached_bytes
    _live.pop(key, None)
    _cached_bytes += nbytes


def track(elem: torch.Tensor) -> None:
    """Note the storage behind a new emulated tensor (views share their base's)."""
    storage = elem.untyped_storage()
    key = id(storage)
    if key not in _live:
        _live[key] = weakref.ref(storage, partial(_freed, key, storage.nbytes()))


def release() -> int:
    """Return the cached bytes to the (emulated) driver; how many there were."""
    global _cached_bytes
    released, _cached_bytes = _cached_bytes, 0
    return released
