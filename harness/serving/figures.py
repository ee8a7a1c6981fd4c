"""The serving world's figures, in reading order: syncs per step by region and against batch
size, the sync blame, findings and failed cells (count pass); step-time ECDFs, host / device /
end-to-end time and latency against batch size (time pass)."""

from __future__ import annotations

from harness.report.figures import FigureSpec
from harness.report.idle_plots import plot_step_breakdown
from harness.report.latency_plots import (
    plot_host_device_e2e,
    plot_latency_ecdf,
    plot_latency_vs_batch,
)
from harness.report.sync_plots import (
    plot_blame,
    plot_findings,
    plot_syncs_by_region,
    plot_syncs_vs_batch,
)
from harness.results.waits import site_costs

FIGURES: dict[str, FigureSpec] = {
    "syncs_by_region": FigureSpec(lambda r: plot_syncs_by_region(r.counts, r.label), "count"),
    "syncs_vs_batch": FigureSpec(lambda r: plot_syncs_vs_batch(r.counts, r.label), "count"),
    "sync_blame": FigureSpec(
        lambda r: plot_blame(
            r.syncs,
            r.counts,
            r.label,
            costs=site_costs(r.waits, r.latency, r.traced_waits, r.traced_latency),
        ),
        "count",
    ),
    "findings": FigureSpec(
        lambda r: plot_findings(r.findings, r.counts, r.outcomes, r.label), "count"
    ),
    "latency_ecdf": FigureSpec(
        lambda r: plot_latency_ecdf(r.latency, r.label, r.is_emulated), "time"
    ),
    "host_device_e2e": FigureSpec(
        lambda r: plot_host_device_e2e(r.latency, r.label, r.is_emulated), "time"
    ),
    "latency_vs_batch": FigureSpec(
        lambda r: plot_latency_vs_batch(r.latency, r.label, r.is_emulated), "time"
    ),
    "step_breakdown": FigureSpec(
        lambda r: plot_step_breakdown(r.traced_waits, r.traced_latency, r.label), "trace"
    ),
}
