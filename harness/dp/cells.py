"""The cells of a DP scenario, each rank's view of a cell, and the world it builds.

A DP cell is one (exchange backend, forward duration, injection off / on); every rank runs
every cell in the same order. Its label is the result tables' `case` of that cell's rows. A
rank's view of a cell is its own serving cell (its variant, mirror setting and batch size,
from its stream) of its own serving section (its prefill schedule and the cell's forward
duration), with its own requests: the scenario's seed plus the rank. Every cell of a rank runs
the same requests, so two cells' steps pair up one to one. Every rank captures the same
buckets, those near any rank's batch size: a rank pads to the bucket of the largest batch
across ranks.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.dp.section import InjectConfig, dp_of
from harness.runner.cells import Cell
from harness.scenario import Scenario
from harness.serving.section import ServingConfig, serving_of

if TYPE_CHECKING:
    import torch

    from harness.dp.exchange import MLPSyncExchange
    from harness.dp.world import DPWorld

IDLE_BATCH_SIZE = 0  # the batch_size column of a rank without requests


@dataclass(frozen=True)
class DPCell:
    backend: str
    forward_us: float
    injected: bool

    @property
    def label(self) -> str:
        """The cell's name in the result tables' `case` column."""
        return f"{self.backend}/fwd{self.forward_us:g}us/" + ("inject" if self.injected else "base")

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def dp_cells(sc: Scenario) -> list[DPCell]:
    """Backend-major, then the forward, then without and with the injection."""
    dp = dp_of(sc)
    forwards = dp.forward_us or [serving_of(sc).forward_us]
    injected = [False, True] if dp.inject is not None else [False]
    return [DPCell(b, f, i) for b, f, i in itertools.product(dp.backend, forwards, injected)]


@dataclass(frozen=True)
class RankStreamView:
    """A rank's stream with the scenario's values filled in."""

    variant: str
    mirror: str
    batch_size: int  # IDLE_BATCH_SIZE: no requests
    prefill_every: int


def rank_stream(sc: Scenario, rank: int) -> RankStreamView:
    dp, serving = dp_of(sc), serving_of(sc)
    s = dp.streams[rank] if rank < len(dp.streams) else None

    def pick(key: str, default: Any) -> Any:
        value = getattr(s, key) if s is not None else None
        return default if value is None else value

    idle = s is not None and s.idle
    return RankStreamView(
        variant=pick("variant", serving.variants[0]),
        mirror=pick("mirror", serving.mirror[0]),
        batch_size=IDLE_BATCH_SIZE if idle else pick("batch_size", serving.batch_sizes[0]),
        prefill_every=0 if idle else pick("prefill_every", serving.prefill_every),
    )


def rank_cell(sc: Scenario, cell: DPCell, rank: int) -> Cell:
    """Rank `rank`'s cell of `cell`: the DP cell's label, the rank's serving cell."""
    s = rank_stream(sc, rank)
    return Cell(case=cell.label, variant=s.variant, mirror=s.mirror, batch_size=s.batch_size)


def rank_serving(sc: Scenario, cell: DPCell, rank: int) -> ServingConfig:
    """The serving section rank `rank` runs `cell` with: its stream's sweeps (one value each),
    its prefill schedule, the cell's forward."""
    s = rank_stream(sc, rank)
    return dataclasses.replace(
        serving_of(sc),
        variants=[s.variant],
        mirror=[s.mirror],
        batch_sizes=[s.batch_size],
        prefill_every=s.prefill_every,
        forward_us=cell.forward_us,
    )


def capture_sizes(sc: Scenario) -> tuple[int, ...]:
    """The buckets every rank captures: those near any rank's batch size."""
    from harness.serving.buckets import DEFAULT_MAX_BS, capture_buckets

    serving = serving_of(sc)
    max_bs = serving.cuda_graph_max_bs or DEFAULT_MAX_BS
    sizes: set[int] = set()
    for rank in range(dp_of(sc).ranks):
        bs = rank_stream(sc, rank).batch_size
        if bs != IDLE_BATCH_SIZE:
            sizes.update(capture_buckets(serving.spec is not None, max_bs, bs, "near"))
    return tuple(sorted(sizes))


@dataclass(frozen=True)
class DPSite:
    """Where a rank's world runs: its rank, the cell, the exchange and what to plant."""

    rank: int
    cell: DPCell
    exchange: MLPSyncExchange
    capture: tuple[int, ...]
    inject: InjectConfig | None  # the scenario's


DPWorldBuilder = Callable[[Scenario, Cell, "torch.device", DPSite], Any]


def build_dp_world(sc: Scenario, cell: Cell, device: torch.device, site: DPSite) -> DPWorld:
    """The rank's serving world for one cell, around the cell's exchange."""
    from harness.dp.inject import Injection
    from harness.dp.world import DPWorld
    from harness.serving.cells import world_config
    from harness.serving.world import build_world

    serving = rank_serving(sc, site.cell, site.rank)
    cfg = world_config(serving, cell, sc.seed + site.rank, capture=site.capture)
    world = build_world(cfg, device)
    injection = None
    inject = site.inject
    if site.cell.injected and inject is not None and inject.rank == site.rank:
        injection = Injection(inject.kind, inject.region, inject.count, device)
    return DPWorld(world, site.exchange, injection, dp_of(sc).speculative_skip_dp_mlp_sync)
