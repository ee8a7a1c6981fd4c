"""The figure registry: name -> function(RunData) -> Figure, and writing them as PNG files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from matplotlib.figure import Figure

from harness.report.latency_plots import (
    plot_bubble_cost,
    plot_host_device_e2e,
    plot_latency_ecdf,
    plot_latency_vs_batch,
)
from harness.report.load import RunData
from harness.report.sync_plots import (
    plot_blame,
    plot_findings,
    plot_syncs_by_region,
    plot_syncs_vs_batch,
)
from harness.results.files import atomic_path

FigureFn = Callable[[RunData], Figure]

# Order = reading order of the report; the number prefix keeps the PNG files in that order.
FIGURES: dict[str, FigureFn] = {
    "syncs_by_region": lambda r: plot_syncs_by_region(r.counts, r.label),
    "syncs_vs_batch": lambda r: plot_syncs_vs_batch(r.counts, r.label),
    "sync_blame": lambda r: plot_blame(r.syncs, r.counts, r.label),
    "findings": lambda r: plot_findings(r.findings, r.counts, r.outcomes, r.label),
    "latency_ecdf": lambda r: plot_latency_ecdf(r.latency, r.label, r.is_emulated),
    "host_device_e2e": lambda r: plot_host_device_e2e(r.latency, r.label, r.is_emulated),
    "latency_vs_batch": lambda r: plot_latency_vs_batch(r.latency, r.label, r.is_emulated),
    "bubble_cost": lambda r: plot_bubble_cost(r.counts, r.latency, r.label, r.is_emulated),
}


def write_report(run: RunData, out_dir: Path | None = None, dpi: int = 110) -> list[Path]:
    """Render every registered figure of a run into PNG files; returns their paths."""
    out = Path(out_dir) if out_dir is not None else run.path / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i, (name, make) in enumerate(FIGURES.items(), start=1):
        path = out / f"{i:02d}_{name}.png"
        with atomic_path(path) as tmp:  # a reader never sees half a PNG
            make(run).savefig(tmp, dpi=dpi, format="png")
        written.append(path)
    return written
