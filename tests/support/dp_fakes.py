"""A DP rank that dies on purpose (the launcher sends the builder to each rank's process)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.dp.cells import build_dp_world

DYING_RANK = 1
DIES_AT_STEP = 2  # of the first cell's count pass, warm-up steps included
EXIT_CODE = 3
# rank 0 busy on the host when its peer dies, until the launcher's SIGTERM ends the sleep (it
# raises RankStopped there); never that long unless the SIGTERM never comes
BUSY_MAX_S = 120.0


class DyingWorld:
    """The real DP world, except that one rank's process exits in the middle of a step (and,
    when `busy`, rank 0 is busy on the host at that step)."""

    def __init__(self, inner, rank: int, busy: bool = False):
        self.inner = inner
        self.rank = rank
        self.busy = busy

    @property
    def findings(self):
        return self.inner.findings

    @property
    def decode_mirror(self) -> str:
        return self.inner.decode_mirror

    def warmup_and_capture(self) -> None:
        self.inner.warmup_and_capture()

    def step(self):
        if self.inner.world.step_count == DIES_AT_STEP:
            if self.rank == DYING_RANK:
                os._exit(EXIT_CODE)  # no clean-up, no goodbye: as a crash
            if self.busy:
                time.sleep(BUSY_MAX_S)
        return self.inner.step()


def dying_builder(sc, cell, device, site):
    return DyingWorld(build_dp_world(sc, cell, device, site), site.rank)


def dying_builder_peer_busy(sc, cell, device, site):
    return DyingWorld(build_dp_world(sc, cell, device, site), site.rank, busy=True)


BLOCKED_FLAG = "HARNESS_TEST_BLOCKED_FLAG"  # environment: a file rank 0 makes as it blocks


class BlockingWorld(DyingWorld):
    """Rank 0 waits in a barrier that rank 1 never joins, while rank 1 waits in the exchange
    for rank 0: both blocked in C++, where no Python signal handler runs, until a timeout."""

    def step(self):
        if self.inner.world.step_count == DIES_AT_STEP and self.rank == 0:
            import torch.distributed as dist

            Path(os.environ[BLOCKED_FLAG]).touch()
            dist.barrier()
        return self.inner.step()


def blocking_builder(sc, cell, device, site):
    return BlockingWorld(build_dp_world(sc, cell, device, site), site.rank)


@contextmanager
def one_rank_group() -> Iterator[object]:
    """A one-rank gloo process group in this process (DP code run in-process), set up and torn
    down around the block."""
    import tempfile

    import torch.distributed as dist

    assert not dist.is_initialized(), "a process group is already set up in this process"
    with tempfile.TemporaryDirectory() as tmp:
        store = dist.FileStore(str(Path(tmp) / "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        try:
            yield dist.group.WORLD
        finally:
            dist.destroy_process_group()
