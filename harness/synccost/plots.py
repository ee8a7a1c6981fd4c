"""The sync-cost experiment's figure: step time against injected syncs per step, one panel per
stand-in forward duration, one line per sync kind, medians with their 95% intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.report import tables
from harness.report.style import empty, new_figure, title
from harness.results.deltas import signed
from harness.results.stats import Interval
from harness.synccost.analysis import SyncCost, sync_costs

KIND_COLORS = {"item": "#1f77b4", "stream_sync": "#d62728", "blocking_copy": "#2ca02c"}
KIND_MARKERS = {"item": "o", "stream_sync": "s", "blocking_copy": "^"}


def _ci_text(ci: Interval | None) -> str:
    if ci is None or ci.low != ci.low:
        return "n/a"
    return f"{signed(ci.estimate, 1)} µs [{signed(ci.low, 1)}, {signed(ci.high, 1)}]"


def plot_sync_cost(latency: pd.DataFrame, label: str = "", emulated: bool = False) -> Figure:
    """Median step time at k = 0, 1, 2, 4 injected syncs per kind and forward duration."""
    steps = tables.step_latency(latency)
    if steps.empty:
        return empty(new_figure(8, 2), "no sync-cost samples in latency.csv")
    metric = tables.headline_metric(steps)
    costs = sync_costs(steps, metric)
    panels = sorted({(c.forward_us, c.batch_size) for c in costs})
    ncols = min(len(panels), 2)  # two across: readable on a laptop screen
    nrows = -(-len(panels) // ncols)
    fig = new_figure(5.8 * ncols + 0.5, 4.6 * nrows + 1.2)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (fwd, bs) in zip(axes, panels):
        here = [c for c in costs if c.forward_us == fwd and c.batch_size == bs]
        for i, c in enumerate(here):
            _kind_line(ax, c, (i - (len(here) - 1) / 2) * 0.08)
        what = "no forward queued" if fwd == 0 else f"forward {fwd:g} µs"
        what += " (not run on the emulated device)" if emulated and fwd else ""
        ax.set_title(f"{what} · batch {bs}", fontsize=10)
        ax.set_xticks(sorted({k for c in here for k in c.ks}))
        notes = [f"{c.kind}: {_ci_text(c.per_sync)} per sync" for c in here]
        ax.set_xlabel("\n".join(["injected syncs per step (k)", *notes]), fontsize=8)
        ax.set_ylabel(f"{metric} time per step (µs), median")
        ax.grid(alpha=0.3)
        _clip_to_medians(ax, here)
        ax.legend(fontsize=8, loc="upper left")
    for ax in axes[len(panels) :]:
        ax.axis("off")
    where = (
        "emulated device: host time only, no forward and no pipeline bubble"
        if emulated
        else "the first sync waits for the queued forward"
    )
    title(
        fig,
        f"What one sync costs: step time against injected syncs ({where}); bars: 95% bootstrap "
        "interval of the median; µs per sync = slope over k, with its interval",
        label,
    )
    return fig


def _clip_to_medians(ax, here: list[SyncCost]) -> None:
    """Keep the medians readable: an interval reaching beyond twice their spread (few noisy
    samples) is cut at the panel's edge, and the panel says so."""
    meds = [m.estimate for c in here for m in c.medians.values()]
    lows = [m.low for c in here for m in c.medians.values() if m.low == m.low]
    highs = [m.high for c in here for m in c.medians.values() if m.high == m.high]
    spread = max(max(meds) - min(meds), 0.05 * max(abs(max(meds)), 1.0))
    lo, hi = min(meds) - 2 * spread, max(meds) + 2 * spread
    if (lows and min(lows) < lo) or (highs and max(highs) > hi):
        ax.set_ylim(max(lo, min(lows, default=lo)), min(hi, max(highs, default=hi)))
        ax.text(
            0.99,
            0.01,
            "some intervals cut at the edge",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=7,
            color="grey",
        )


def _kind_line(ax, c: SyncCost, shift: float) -> None:
    ks = np.array(c.ks, dtype=float)
    med = np.array([c.medians[k].estimate for k in c.ks])
    lo = np.array([c.medians[k].low for k in c.ks])
    hi = np.array([c.medians[k].high for k in c.ks])
    ax.errorbar(
        ks + shift,
        med,
        yerr=[np.nan_to_num(med - lo), np.nan_to_num(hi - med)],
        capsize=3,
        color=KIND_COLORS.get(c.kind, "black"),
        marker=KIND_MARKERS.get(c.kind, "D"),
        label=c.kind,
    )
