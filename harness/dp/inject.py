"""A sync planted on one rank, to measure what it costs the other ranks.

Each kind waits for the device the way its namesake does: ``item`` and ``cpu`` read a device
value back (a ``d2h_read``), ``synchronize`` waits for the whole device (``explicit``). The
probe is a one-element device tensor made with the world, so a read waits for all the work
queued before it on the stream, as any read in the scheduler would.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

INJECT_KINDS: dict[str, Callable[[torch.Tensor], object]] = {
    "item": lambda probe: probe.item(),
    "cpu": lambda probe: probe.cpu(),
    "synchronize": lambda probe: torch.cuda.synchronize(),
}
# where in a rank's step (regions of harness.dp.world): before the exchange, or where the
# previous step's results are processed
INJECT_REGIONS = ("step/scheduler/prepare", "step/scheduler/process_result")


class Injection:
    """``count`` syncs of ``kind``, made each step in ``region``."""

    def __init__(self, kind: str, region: str, count: int, device: torch.device) -> None:
        if region not in INJECT_REGIONS:
            raise ValueError(f"inject region {region!r}; known: {INJECT_REGIONS}")
        self.sync = INJECT_KINDS[kind]
        self.region = region
        self.count = count
        self.probe = torch.zeros(1, dtype=torch.int32, device=device)

    def at(self, region: str) -> None:
        """Make the syncs when ``region`` is this injection's region."""
        if region == self.region:
            for _ in range(self.count):
                self.sync(self.probe)
