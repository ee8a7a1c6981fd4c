"""The sync-cost experiment as a plugin (harness.registry): its scenario section `sync_cost`,
its cells (one per case and batch size: the case in the `case` column) and their step, its
summary (µs per sync) and its figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.registry import WorldPlugin, register_world
from harness.report.figures import FigureSpec, ReportPart
from harness.results.vocabulary import ResultsPart
from harness.runner.cells import Cell, RunnerPart
from harness.scenario import Scenario
from harness.scenario.schema import ScenarioPart
from harness.synccost.cases import enumerate_cases
from harness.synccost.section import SECTION, SyncCostConfig
from harness.synccost.summary import sync_cost_summary

if TYPE_CHECKING:
    import torch

    from harness.synccost.world import SyncCostWorld


def sync_cost_cells(sc: Scenario) -> list[Cell]:
    cfg: SyncCostConfig = sc.section(SECTION)
    cases = enumerate_cases(cfg.kinds, cfg.k, cfg.forward_us)
    return [Cell(case=case.label, batch_size=b) for case in cases for b in cfg.batch_sizes]


def build(sc: Scenario, cell: Cell, device: torch.device) -> SyncCostWorld:
    from harness.synccost.world import build_sync_cost_world

    return build_sync_cost_world(sc, cell, device)


def figures() -> dict[str, FigureSpec]:
    from harness.synccost.plots import plot_sync_cost

    draw = FigureSpec(lambda r: plot_sync_cost(r.latency, r.label, r.is_emulated), "time")
    return {"sync_cost": draw}


PLUGIN = register_world(
    WorldPlugin(
        "sync_cost",
        (
            ScenarioPart(sections={SECTION: SyncCostConfig}),
            RunnerPart(sync_cost_cells, build),
            ResultsPart(sync_cost_summary),
            ReportPart(figures),
        ),
    )
)
