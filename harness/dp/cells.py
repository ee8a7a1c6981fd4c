"""The cells of a DP scenario, each rank's view of a cell, and the world it builds.

A DP cell is one (exchange backend, forward duration, injection off / on); every rank runs
every cell in the same order. A rank's view of a cell is a single-cell scenario (its own
variant, mirror, batch size, prefill schedule and forward duration, and its own requests: the
scenario's seed plus the rank), named by the cell, so the runner's per-cell passes run it
unchanged and its rows carry the cell's label in the ``scenario`` column. Every cell of a rank
runs the same requests, so two cells' steps pair up one to one. Every rank captures the same buckets, those near any rank's batch size:
a rank pads to the bucket of the largest batch across ranks.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from harness.dp.exchange import MLPSyncExchange
from harness.dp.inject import Injection
from harness.dp.world import DPWorld
from harness.runner.cells import Cell, world_config_kwargs
from harness.scenario import Scenario
from harness.scenario.schema import InjectConfig
from harness.serving import WorldConfig, build_world
from harness.serving.buckets import DEFAULT_MAX_BS, capture_buckets

IDLE_BATCH_SIZE = 0  # the batch_size column of a rank without requests


@dataclass(frozen=True)
class DPCell:
    backend: str
    forward_us: float
    injected: bool

    def label(self, scenario: str) -> str:
        """The cell's name in the result tables' ``scenario`` column."""
        return f"{scenario}/{self.backend}/fwd{self.forward_us:g}us/" + (
            "inject" if self.injected else "base"
        )

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def dp_cells(sc: Scenario) -> list[DPCell]:
    """Backend-major, then the forward, then without and with the injection."""
    dp = sc.dp
    assert dp is not None, "not a DP scenario"
    forwards = dp.forward_us or [sc.forward_us]
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
    dp = sc.dp
    assert dp is not None, "not a DP scenario"
    s = dp.streams[rank] if rank < len(dp.streams) else None

    def pick(key: str, default: Any) -> Any:
        value = getattr(s, key) if s is not None else None
        return default if value is None else value

    idle = s is not None and s.idle
    return RankStreamView(
        variant=pick("variant", sc.variants[0]),
        mirror=pick("mirror", sc.mirror[0]),
        batch_size=IDLE_BATCH_SIZE if idle else pick("batch_size", sc.batch_sizes[0]),
        prefill_every=0 if idle else pick("prefill_every", sc.prefill_every),
    )


def rank_scenario(sc: Scenario, cell: DPCell, rank: int) -> Scenario:
    """The single-cell scenario rank ``rank`` runs for ``cell``."""
    s = rank_stream(sc, rank)
    return dataclasses.replace(
        sc,
        name=cell.label(sc.name),
        seed=sc.seed + rank,
        variants=[s.variant],
        mirror=[s.mirror],
        batch_sizes=[s.batch_size],
        prefill_every=s.prefill_every,
        forward_us=cell.forward_us,
    )


def capture_sizes(sc: Scenario) -> tuple[int, ...]:
    """The buckets every rank captures: those near any rank's batch size."""
    max_bs = sc.cuda_graph_max_bs or DEFAULT_MAX_BS
    sizes: set[int] = set()
    for rank in range(sc.dp.ranks):
        bs = rank_stream(sc, rank).batch_size
        if bs != IDLE_BATCH_SIZE:
            sizes.update(capture_buckets(False, max_bs, bs, "near"))
    return tuple(sorted(sizes))


@dataclass(frozen=True)
class DPSite:
    """Where a rank's world runs: its rank, the cell, the exchange and what to plant."""

    rank: int
    cell: DPCell
    exchange: MLPSyncExchange
    capture: tuple[int, ...]
    inject: InjectConfig | None  # the scenario's


DPWorldBuilder = Callable[[Scenario, Cell, torch.device, DPSite], Any]


def build_dp_world(sc: Scenario, cell: Cell, device: torch.device, site: DPSite) -> DPWorld:
    """The rank's serving world for one cell, around the cell's exchange."""
    kw = world_config_kwargs(sc, cell)
    world = build_world(WorldConfig(**kw, capture=site.capture), device)
    injection = None
    inject = site.inject
    if site.cell.injected and inject is not None and inject.rank == site.rank:
        injection = Injection(inject.kind, inject.region, inject.count, device)
    return DPWorld(world, site.exchange, injection)
