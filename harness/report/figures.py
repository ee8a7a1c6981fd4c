"""The report's part of a world, and writing a run's figures as PNG files.

Each world registers a `ReportPart` (harness.registry): its figures in reading order, each
with what it draws and which pass it needs. A run's figures are those of the worlds its
scenarios belong to, each drawn from that world's rows; the number prefix keeps the PNG
files in reading order. A run that has a world's cells but not the pass a figure needs (a
count-only run has no time pass) gets no placeholder image: `write_report` says so in one line
per reason.

Nothing here imports matplotlib: a figure's module is imported when the figure is drawn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from harness import registry
from harness.results.files import atomic_path
from harness.results.load import FRAMES, RunData, rows_of
from harness.results.samples import step_times

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# What a figure needs of its world's rows: why it is not drawn when the run lacks it.
NEEDS: dict[str, tuple[Callable[[RunData], bool], str]] = {
    "count": (lambda r: not r.counts.empty, "no count pass in this run"),
    "time": (lambda r: not step_times(r.latency).empty, "no time pass in this run"),
    "trace": (
        lambda r: not r.traced_latency.empty,
        "no traced steps in this run: device time not measured",
    ),
}


@dataclass(frozen=True)
class FigureSpec:
    draw: Callable[[RunData], Figure]  # gets its world's rows of the run only
    needs: str  # a NEEDS key


def as_they_are(run: RunData) -> RunData:
    """The serving view of a world whose cells are serving cells already."""
    return run


@dataclass(frozen=True)
class ReportPart:
    """A world's figures (in reading order); for the trace, where each step starts on a time
    axis its cells share (DP attention: the ranks aligned at the exchange; None: each cell's
    steps laid end to end); and its rows as the serving world's tables and figures draw them
    in the notebooks (DP attention: each DP cell a scenario of its own; None: they do not)."""

    figures: Callable[[], dict[str, FigureSpec]]  # imports the drawing modules when called
    step_starts: Callable[[RunData], dict[tuple, float]] | None = None
    serving_view: Callable[[RunData], RunData] | None = None


def report_parts(run: RunData) -> dict[str, ReportPart]:
    """The report parts of the worlds the run's scenarios belong to, in registry order."""
    present = set(run.worlds.values())
    return {name: part for name, part in registry.parts(ReportPart).items() if name in present}


def figures_of(run: RunData) -> dict[str, tuple[str, FigureSpec]]:
    """Every figure the run's worlds draw: file stem -> (world, figure)."""
    out = {}
    for world, part in report_parts(run).items():
        for name, spec in part.figures().items():
            out[f"{len(out) + 1:02d}_{name}"] = (world, spec)
    return out


def serving_rows(run: RunData) -> RunData:
    """The run's rows the serving world's tables and figures draw, each world's in its view
    (ReportPart.serving_view); the run's meta.json and stacks as they are."""
    views = [
        part.serving_view(rows_of(run, world))
        for world, part in report_parts(run).items()
        if part.serving_view is not None
    ]
    return dataclasses.replace(
        run,
        **{
            t: pd.concat([getattr(v, t) for v in views], ignore_index=True)
            if views
            else getattr(run, t).iloc[0:0]
            for t in FRAMES
        },
    )


def has_cells(run: RunData) -> bool:
    return not (run.counts.empty and run.latency.empty and run.outcomes.empty)


@dataclass
class Report:
    written: list[Path]
    not_drawn: dict[str, list[str]] = field(default_factory=dict)  # reason -> figure files

    def notes(self) -> list[str]:
        return [f"not drawn ({why}): {', '.join(names)}" for why, names in self.not_drawn.items()]


def drawable(run: RunData) -> tuple[list[tuple[str, FigureSpec, RunData]], dict[str, list[str]]]:
    """The figures of the run's worlds it has data for (file stem, figure, the rows it draws),
    and the stems of those it lacks data for, by reason."""
    out: list[tuple[str, FigureSpec, RunData]] = []
    lacking: dict[str, list[str]] = {}
    for stem, (world, spec) in figures_of(run).items():
        rows = rows_of(run, world)
        if not has_cells(rows):
            continue
        has, why = NEEDS[spec.needs]
        if has(rows):
            out.append((stem, spec, rows))
        else:
            lacking.setdefault(why, []).append(stem)
    return out, lacking


def write_report(run: RunData, out_dir: Path | None = None, dpi: int = 110) -> Report:
    """Render every figure of the run's worlds it has data for into PNG files."""
    out = Path(out_dir) if out_dir is not None else run.path / "plots"
    out.mkdir(parents=True, exist_ok=True)
    figures, lacking = drawable(run)
    report = Report([], {why: [f"{s}.png" for s in stems] for why, stems in lacking.items()})
    for stem, spec, rows in figures:
        path = out / f"{stem}.png"
        with atomic_path(path) as tmp:  # a reader never sees half a PNG
            spec.draw(rows).savefig(tmp, dpi=dpi, format="png")
        report.written.append(path)
    return report
