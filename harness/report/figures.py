"""The figure registry: name -> what it draws and what it needs, and writing them as PNG files.

Each figure draws one kind of cells (the serving world's, or the sync-cost experiment's) from
one pass. A run without such cells skips the figure silently; a run that has the cells but not
the pass (a count-only run has no time pass) gets no placeholder image: `write_report` says so
in one line per reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from harness.report.dp_plots import plot_dp_exchange_wait, plot_dp_syncs_per_rank
from harness.report.dp_tables import is_dp_run
from harness.report.latency_plots import (
    plot_host_device_e2e,
    plot_latency_ecdf,
    plot_latency_vs_batch,
)
from harness.results.load import RunData
from harness.report.sync_cost_plots import plot_sync_cost
from harness.report.sync_plots import (
    plot_blame,
    plot_findings,
    plot_syncs_by_region,
    plot_syncs_vs_batch,
)
from harness.results.files import atomic_path
from harness.results.samples import step_times
from harness.synccost.analysis import only_cases, without_cases

TABLES = ("counts", "syncs", "latency", "outcomes", "findings")


def serving_part(run: RunData) -> RunData:
    """The run's serving cells (without the sync-cost experiment's)."""
    return dataclasses.replace(run, **{t: without_cases(getattr(run, t)) for t in TABLES})


def sync_cost_part(run: RunData) -> RunData:
    """The run's sync-cost cells."""
    return dataclasses.replace(run, **{t: only_cases(getattr(run, t)) for t in TABLES})


def dp_part(run: RunData) -> RunData:
    """A DP-attention run's cells (its ranks exchange every step); none for any other run."""
    if is_dp_run(run):
        return run
    return dataclasses.replace(run, **{t: getattr(run, t).iloc[0:0] for t in TABLES})


# Kinds of cells a figure draws; a run without such cells has nothing to say about it.
PARTS: dict[str, Callable[[RunData], RunData]] = {
    "serving": serving_part,
    "sync_cost": sync_cost_part,
    "dp": dp_part,
}
# What a figure needs of those cells: why it is not drawn when the run lacks it.
NEEDS: dict[str, tuple[Callable[[RunData], bool], str]] = {
    "count": (lambda r: not r.counts.empty, "no count pass in this run"),
    "time": (lambda r: not step_times(r.latency).empty, "no time pass in this run"),
}


@dataclass(frozen=True)
class FigureSpec:
    draw: Callable[[RunData], Figure]  # gets the run's part only
    part: str  # a PARTS key
    needs: str  # a NEEDS key


# Order = reading order of the report; the number prefix keeps the PNG files in that order.
FIGURES: dict[str, FigureSpec] = {
    "syncs_by_region": FigureSpec(
        lambda r: plot_syncs_by_region(r.counts, r.label), "serving", "count"
    ),
    "syncs_vs_batch": FigureSpec(
        lambda r: plot_syncs_vs_batch(r.counts, r.label), "serving", "count"
    ),
    "sync_blame": FigureSpec(lambda r: plot_blame(r.syncs, r.counts, r.label), "serving", "count"),
    "findings": FigureSpec(
        lambda r: plot_findings(r.findings, r.counts, r.outcomes, r.label), "serving", "count"
    ),
    "latency_ecdf": FigureSpec(
        lambda r: plot_latency_ecdf(r.latency, r.label, r.is_emulated), "serving", "time"
    ),
    "host_device_e2e": FigureSpec(
        lambda r: plot_host_device_e2e(r.latency, r.label, r.is_emulated), "serving", "time"
    ),
    "latency_vs_batch": FigureSpec(
        lambda r: plot_latency_vs_batch(r.latency, r.label, r.is_emulated), "serving", "time"
    ),
    "sync_cost": FigureSpec(
        lambda r: plot_sync_cost(r.latency, r.label, r.is_emulated), "sync_cost", "time"
    ),
    "dp_syncs_per_rank": FigureSpec(plot_dp_syncs_per_rank, "dp", "count"),
    "dp_exchange_wait": FigureSpec(plot_dp_exchange_wait, "dp", "time"),
}


def has_cells(run: RunData) -> bool:
    return not (run.counts.empty and run.latency.empty and run.outcomes.empty)


@dataclass
class Report:
    written: list[Path]
    not_drawn: dict[str, list[str]]  # reason -> figure files it left out

    def notes(self) -> list[str]:
        return [f"not drawn ({why}): {', '.join(names)}" for why, names in self.not_drawn.items()]


def write_report(run: RunData, out_dir: Path | None = None, dpi: int = 110) -> Report:
    """Render every registered figure the run has data for into PNG files."""
    out = Path(out_dir) if out_dir is not None else run.path / "plots"
    out.mkdir(parents=True, exist_ok=True)
    report = Report([], {})
    for i, (name, spec) in enumerate(FIGURES.items(), start=1):
        path = out / f"{i:02d}_{name}.png"
        part = PARTS[spec.part](run)
        if not has_cells(part):
            continue  # e.g. the sync-cost figure of a serving run: nothing to say
        has, why = NEEDS[spec.needs]
        if not has(part):
            report.not_drawn.setdefault(why, []).append(path.name)
            continue
        with atomic_path(path) as tmp:  # a reader never sees half a PNG
            spec.draw(part).savefig(tmp, dpi=dpi, format="png")
        report.written.append(path)
    return report
