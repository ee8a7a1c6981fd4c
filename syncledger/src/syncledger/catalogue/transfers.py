"""Copies between host and device, explicit synchronizes and the allocator."""

from __future__ import annotations

import torch

from syncledger.catalogue import Inputs, Setup, case
from syncledger.events import SyncKind

D2H, H2D = SyncKind.D2H_READ, SyncKind.H2D_BLOCKING
ASYNC, STAGED = SyncKind.PAGEABLE_ASYNC, SyncKind.PAGEABLE_STAGED
EXPLICIT, ALLOCATOR = SyncKind.EXPLICIT, SyncKind.ALLOCATOR
KIB, MIB = 1 << 10, 1 << 20


def _sized(nbytes: int) -> Setup:
    """Setup: a pageable host buffer and a device buffer of `nbytes`."""

    def setup(t: Inputs, dev: torch.device) -> None:
        t["src"] = torch.empty(nbytes, dtype=torch.uint8)
        t["dst"] = torch.empty(nbytes, dtype=torch.uint8, device=dev)

    return setup


def _cache_a_block(t: Inputs, dev: torch.device) -> None:
    block = torch.empty(MIB, dtype=torch.float32, device=dev)
    del block  # freed: the caching allocator keeps it


def _empty_the_cache(t: Inputs, dev: torch.device) -> None:
    torch.cuda.empty_cache()


def _event_sync() -> None:
    event = torch.cuda.Event()
    event.record()
    event.synchronize()


# ---- from Python data ---------------------------------------------------------------------
case("tensor_from_list", lambda t, dev: torch.tensor([1, 2, 3], device=dev), {H2D: 1})
case("tensor_from_empty_list", lambda t, dev: torch.tensor([], device=dev))
case(
    "as_tensor_from_list",
    lambda t, dev: torch.as_tensor([1, 2], device=dev),
    {H2D: 1},
)
case("new_tensor_from_list", lambda t, dev: t["d"].new_tensor([1, 2]), {H2D: 1})
# the backend's way with small host lists: pinned staging, then an asynchronous copy
case(
    "pinned_list_to_device",
    lambda t, dev: torch.tensor([1, 2, 3], pin_memory=True).to(dev, non_blocking=True),
)

# ---- host to device -------------------------------------------------------------------------
case("h2d_blocking_pageable", lambda t, dev: t["pageable"].to(dev), {H2D: 1})
case("h2d_blocking_pinned", lambda t, dev: t["pinned"].to(dev), {H2D: 1})
case("h2d_nonblocking_pinned", lambda t, dev: t["pinned"].to(dev, non_blocking=True))
# a strided pinned source is staged through a pageable temporary: a hazard, not a wait
case(
    "h2d_nonblocking_strided_pinned",
    lambda t, dev: t["d"].copy_(t["pinned_strided"], non_blocking=True),
    {STAGED: 1},
)
# pageable non_blocking: the driver stages up to 2 MiB and returns; larger copies wait
for _size, _label, _kind in (
    (4 * KIB, "4KiB", STAGED),
    (64 * KIB, "64KiB", STAGED),
    (1 * MIB, "1MiB", STAGED),
    (2 * MIB, "2MiB", STAGED),
    (2 * MIB + 4 * KIB, "2MiB_4KiB", ASYNC),
    (4 * MIB, "4MiB", ASYNC),
    (16 * MIB, "16MiB", ASYNC),
    (64 * MIB, "64MiB", ASYNC),
):
    case(
        f"h2d_nonblocking_pageable_{_label}",
        lambda t, dev: t["dst"].copy_(t["src"], non_blocking=True),
        {_kind: 1},
        setup=_sized(_size),
    )

# ---- device to host -------------------------------------------------------------------------
case("d2h_nonblocking_to", lambda t, dev: t["d"].to("cpu", non_blocking=True))
case(
    "d2h_nonblocking_into_pinned",
    lambda t, dev: t["host_out_pinned"].copy_(t["d"], non_blocking=True),
)
case(
    "d2h_blocking_into_pinned",
    lambda t, dev: t["host_out_pinned"].copy_(t["d"]),
    {D2H: 1},
)
case(
    "d2h_nonblocking_into_pageable",
    lambda t, dev: t["host_out_pageable"].copy_(t["d"], non_blocking=True),
    {ASYNC: 1},
)
# a strided pinned destination is staged through a pageable temporary: the host waits
case(
    "d2h_nonblocking_into_strided_pinned",
    lambda t, dev: t["pinned_strided"].copy_(t["d"], non_blocking=True),
    {ASYNC: 1},
)

# ---- nothing to copy ------------------------------------------------------------------------
case(
    "zero_bytes_h2d_nonblocking",
    lambda t, dev: torch.empty(0, device=dev).copy_(torch.empty(0), non_blocking=True),
)
case("zero_bytes_h2d_blocking", lambda t, dev: torch.empty(0, device=dev).copy_(torch.empty(0)))
case("zero_bytes_d2h", lambda t, dev: torch.empty(0).copy_(torch.empty(0, device=dev)))

# ---- explicit synchronization and the allocator -----------------------------------------
case("device_synchronize", lambda t, dev: torch.cuda.synchronize(), {EXPLICIT: 1})
case(
    "stream_synchronize",
    lambda t, dev: torch.cuda.current_stream().synchronize(),
    {EXPLICIT: 1},
)
case("event_synchronize", lambda t, dev: _event_sync(), {EXPLICIT: 1})
case(
    "empty_cache_with_cached_blocks",
    lambda t, dev: torch.cuda.empty_cache(),
    {ALLOCATOR: 1},
    setup=_cache_a_block,
)
case(
    "empty_cache_nothing_cached",
    lambda t, dev: torch.cuda.empty_cache(),
    setup=_empty_the_cache,
)
