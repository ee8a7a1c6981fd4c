"""A DP rank that dies on purpose (the launcher sends the builder to each rank's process)."""

from __future__ import annotations

import os

from harness.dp.cells import build_dp_world

DYING_RANK = 1
DIES_AT_STEP = 2  # of the first cell's count pass, warm-up steps included
EXIT_CODE = 3


class DyingWorld:
    """The real DP world, except that one rank's process exits in the middle of a step."""

    def __init__(self, inner, rank: int):
        self.inner = inner
        self.rank = rank

    @property
    def findings(self):
        return self.inner.findings

    @property
    def decode_mirror(self) -> str:
        return self.inner.decode_mirror

    def warmup_and_capture(self) -> None:
        self.inner.warmup_and_capture()

    def step(self):
        if self.rank == DYING_RANK and self.inner.world.step_count == DIES_AT_STEP:
            os._exit(EXIT_CODE)  # no clean-up, no goodbye: as a crash
        return self.inner.step()


def dying_builder(sc, cell, device, site):
    return DyingWorld(build_dp_world(sc, cell, device, site), site.rank)
