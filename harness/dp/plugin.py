"""DP attention as a plugin (harness.registry): its scenario section `dp` beside the `serving`
section its ranks run, its cells (exchange backend x forward x injection, the label in the
`case` column) run by rank processes of their own, its summary, figures and trace axis."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from harness.dp.cells import dp_cells, rank_cell
from harness.dp.section import SECTION, DPConfig, check_dp
from harness.dp.summary import dp_summary
from harness.dp.trace import aligned_step_starts
from harness.registry import WorldPlugin, register_world
from harness.report.figures import FigureSpec, ReportPart
from harness.results.load import RunData
from harness.results.tables import COLUMNS
from harness.results.vocabulary import ResultsPart
from harness.runner.cells import Cell, RunnerPart
from harness.scenario import LoadedScenario, Scenario
from harness.scenario.schema import ScenarioPart
from harness.serving import plugin as serving
from harness.serving.cells import check_serving_cell, serving_footprint
from harness.serving.section import SECTION as SERVING
from harness.serving.vocabulary import serving_vocabulary


def rank0_cells(sc: Scenario) -> list[Cell]:
    """Rank 0's cells (each rank runs its own view of every DP cell)."""
    return [rank_cell(sc, cell, 0) for cell in dp_cells(sc)]


def launch(loaded: LoadedScenario, device: str, asked: str | None, out_root: Path) -> int:
    from harness.dp.launch import run_dp_bench

    return run_dp_bench(loaded, device, asked, out_root)


def per_cell(run: RunData) -> RunData:
    """The run with each DP cell as a scenario of its own (`scenario/case`): the serving
    figures draw a scenario's cells together, and a DP cell's ranks are its cells."""

    def named(df: pd.DataFrame) -> pd.DataFrame:
        return df.assign(scenario=df["scenario"] + "/" + df["case"]) if len(df) else df

    return dataclasses.replace(run, **{t: named(getattr(run, t)) for t in COLUMNS})


def dp_runs(run: RunData) -> RunData:
    """What the DP figures draw: a DP run as it is; several DP runs shown together as one,
    each cell labelled `scenario/label` (the `case` column and meta.json's cells alike)."""
    if not run.parts:
        return run
    cells = {
        f"{part.meta['scenario']}/{label}": {**axes, "scenario": part.meta["scenario"]}
        for part in run.parts
        for label, axes in part.meta["dp"]["cells"].items()
    }
    injects = [part.meta["dp"].get("inject") for part in run.parts]
    inject = injects[0] if all(i == injects[0] for i in injects) else None
    meta = {**run.meta, "dp": {"cells": cells, "inject": inject}}

    def labelled(df: pd.DataFrame) -> pd.DataFrame:
        return df.assign(case=df["scenario"] + "/" + df["case"]) if len(df) else df

    return dataclasses.replace(run, meta=meta, **{t: labelled(getattr(run, t)) for t in COLUMNS})


def figures() -> dict[str, FigureSpec]:
    from harness.dp.plots import plot_dp_exchange_wait, plot_dp_syncs_per_rank

    cells = {
        name: FigureSpec(lambda r, draw=spec.draw: draw(per_cell(r)), spec.needs)
        for name, spec in serving.figures().items()
    }
    return {
        **cells,
        "dp_syncs_per_rank": FigureSpec(lambda r: plot_dp_syncs_per_rank(dp_runs(r)), "count"),
        "dp_exchange_wait": FigureSpec(lambda r: plot_dp_exchange_wait(dp_runs(r)), "time"),
    }


PLUGIN = register_world(
    WorldPlugin(
        "dp",
        (
            ScenarioPart(sections={SECTION: DPConfig}, uses=(SERVING,), check=check_dp),
            RunnerPart(
                rank0_cells,
                None,
                check_serving_cell,
                serving_footprint,
                launch=launch,
                gated=False,
            ),
            ResultsPart(dp_summary, serving_vocabulary),
            ReportPart(figures, step_starts=aligned_step_starts, serving_view=per_cell),
        ),
    )
)
