"""Which host memory is pinned, on the emulated device (CPU-only builds cannot pin)."""

from __future__ import annotations

import torch

from syncledger.platform import cuda_present

# storage address -> the storage itself: holding it keeps the address from being reused by a
# pageable allocation (the real pinned caching allocator also keeps its blocks)
_PINNED: dict[int, torch.UntypedStorage] = {}


def pin(t: torch.Tensor) -> torch.Tensor:
    """Mark host tensor `t` (and every view of its storage) as pinned; returns `t`."""
    storage = t.untyped_storage()
    _PINNED[storage.data_ptr()] = storage
    return t


def is_pinned(t: torch.Tensor) -> bool:
    if t.device.type != "cpu":
        return False
    if t.untyped_storage().data_ptr() in _PINNED:
        return True
    return cuda_present() and t.is_pinned()


def clear() -> None:
    _PINNED.clear()
