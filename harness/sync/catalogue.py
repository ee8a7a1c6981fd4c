"""Planted syncs: known-bad (and known-good) snippets with the syncs each must produce.

The ledger is trusted only because it catches every one of these, on the emulated device (in
CI) and on a GPU (where the profiler's record of CUDA runtime calls must agree).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.sync.events import SyncKind

Setup = Callable[[torch.device], dict[str, torch.Tensor]]
Body = Callable[[dict[str, torch.Tensor], torch.device], object]


@dataclass(frozen=True)
class Pattern:
    name: str
    body: Body  # the one line under test; its syncs are what the ledger must see
    expected: dict[SyncKind, int]  # empty: the body must make no sync

    @property
    def total(self) -> int:
        return sum(self.expected.values())


def make_inputs(dev: torch.device) -> dict[str, torch.Tensor]:
    """Inputs built outside the measured block, so their own transfers don't count."""
    d = torch.arange(1, 9, dtype=torch.int64, device=dev)
    return {
        "d": d,
        "repeats": torch.full((8,), 2, dtype=torch.int64, device=dev),
        "pageable": torch.arange(8, dtype=torch.int64),
        "pinned": torch.arange(8, dtype=torch.int64).pin_memory(),
        "host_out_pinned": torch.empty(8, dtype=torch.int64).pin_memory(),
        "host_out_pageable": torch.empty(8, dtype=torch.int64),
    }


D2H, H2D = SyncKind.D2H_READ, SyncKind.H2D_BLOCKING
PAGEABLE, EXPLICIT = SyncKind.PAGEABLE_ASYNC, SyncKind.EXPLICIT

PATTERNS: list[Pattern] = [
    Pattern("item", lambda t, dev: t["d"].sum().item(), {D2H: 1}),
    Pattern("tolist", lambda t, dev: t["d"].tolist(), {D2H: 1}),
    Pattern("cpu", lambda t, dev: t["d"].cpu(), {D2H: 1}),
    Pattern("int", lambda t, dev: int(t["d"][0]), {D2H: 1}),
    Pattern("bool", lambda t, dev: bool(t["d"][0] > 0), {D2H: 1}),
    Pattern("nonzero", lambda t, dev: t["d"].nonzero(), {D2H: 1}),
    Pattern("bool_mask_index", lambda t, dev: t["d"][t["d"] > 3], {D2H: 1}),
    Pattern(
        # two waits on CUDA: the output size, then the check that no repeat is negative
        "repeat_interleave_tensor",
        lambda t, dev: t["d"].repeat_interleave(t["repeats"]),
        {D2H: 2},
    ),
    Pattern(
        "repeat_interleave_output_size",
        lambda t, dev: t["d"].repeat_interleave(t["repeats"], output_size=16),
        {},
    ),
    Pattern("repeat_interleave_int", lambda t, dev: t["d"].repeat_interleave(2), {}),
    Pattern("tensor_from_list", lambda t, dev: torch.tensor([1, 2, 3], device=dev), {H2D: 1}),
    Pattern("h2d_blocking_pageable", lambda t, dev: t["pageable"].to(dev), {H2D: 1}),
    Pattern("h2d_blocking_pinned", lambda t, dev: t["pinned"].to(dev), {H2D: 1}),
    Pattern(
        "h2d_nonblocking_pageable",
        lambda t, dev: t["pageable"].to(dev, non_blocking=True),
        {PAGEABLE: 1},
    ),
    Pattern("h2d_nonblocking_pinned", lambda t, dev: t["pinned"].to(dev, non_blocking=True), {}),
    Pattern("d2h_nonblocking_to", lambda t, dev: t["d"].to("cpu", non_blocking=True), {}),
    Pattern(
        "d2h_nonblocking_into_pinned",
        lambda t, dev: t["host_out_pinned"].copy_(t["d"], non_blocking=True),
        {},
    ),
    Pattern(
        "d2h_nonblocking_into_pageable",
        lambda t, dev: t["host_out_pageable"].copy_(t["d"], non_blocking=True),
        {PAGEABLE: 1},
    ),
    Pattern("device_synchronize", lambda t, dev: torch.cuda.synchronize(), {EXPLICIT: 1}),
    Pattern(
        "stream_synchronize",
        lambda t, dev: torch.cuda.current_stream().synchronize(),
        {EXPLICIT: 1},
    ),
    Pattern("event_synchronize", lambda t, dev: _event_sync(), {EXPLICIT: 1}),
    Pattern("cumsum", lambda t, dev: t["d"].cumsum(0), {}),
    Pattern("setitem_scalar", lambda t, dev: t["d"].__setitem__(slice(0, 2), 0), {}),
    # a scalar through a boolean mask is a masked_fill on CUDA: no wait
    Pattern("setitem_bool_mask_scalar", lambda t, dev: t["d"].__setitem__(t["d"] > 3, 0), {}),
    Pattern(
        "setitem_bool_mask_tensor",
        lambda t, dev: t["d"].__setitem__(t["d"] > 3, t["repeats"][:5]),
        {D2H: 1},
    ),
    Pattern("max_unread", lambda t, dev: t["d"].max(), {}),
    Pattern("pinned_list_to_device", lambda t, dev: _pinned_list(dev), {}),
]


def _event_sync() -> None:
    event = torch.cuda.Event()
    event.record()
    event.synchronize()


def _pinned_list(dev: torch.device) -> torch.Tensor:
    # the backend's way of moving small host lists: pinned staging, then an async copy
    return torch.tensor([1, 2, 3], dtype=torch.int32, pin_memory=True).to(dev, non_blocking=True)


PATTERNS_BY_NAME = {p.name: p for p in PATTERNS}
