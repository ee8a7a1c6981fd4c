"""Classification rules shared by the CUDA interceptors and the emulated device."""

from __future__ import annotations

from harness.sync.events import SyncKind


def classify_h2d(non_blocking: bool, src_pinned: bool) -> SyncKind | None:
    """A host-to-device copy: blocking always waits; non_blocking waits only from pageable memory."""
    if not non_blocking:
        return SyncKind.H2D_BLOCKING
    return None if src_pinned else SyncKind.PAGEABLE_ASYNC


def classify_d2h(non_blocking: bool, dst_pinned: bool) -> SyncKind | None:
    """A device-to-host copy: blocking is a read; non_blocking into pageable memory still waits."""
    if not non_blocking:
        return SyncKind.D2H_READ
    return None if dst_pinned else SyncKind.PAGEABLE_ASYNC


# Friendly names for the user-facing calls that lead to a sync, so events say `item` rather
# than `_local_scalar_dense`. Keys are the names of torch functions / Tensor methods.
FRIENDLY_OPS = frozenset(
    {
        "item",
        "tolist",
        "cpu",
        "cuda",
        "to",
        "copy_",
        "__int__",
        "__bool__",
        "__float__",
        "__index__",
        "__getitem__",
        "__setitem__",
        "__format__",
        "nonzero",
        "argwhere",
        "repeat_interleave",
        "masked_select",
        "unique",
        "unique_consecutive",
        "equal",
        "allclose",
        "tensor",
        "as_tensor",
        "new_tensor",
        "bincount",
    }
)
