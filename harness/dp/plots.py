"""Figures of a DP-attention run: syncs per step on each rank, and the exchange wait per rank
and step without and with one rank's planted sync (the stall it spreads)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.dp.summary import EXCHANGE_REGION, dp_cells, exchange_wait, syncs_per_rank_step
from harness.report.style import empty, maybe_log, new_figure, shared_legend_entries, title
from harness.results.load import RunData

_RANK_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def _rank_style(rank: int) -> dict:
    """Colour per rank; lower ranks drawn wider, so equal lines stay visible when overlaid."""
    return {
        "color": _RANK_COLORS[rank % len(_RANK_COLORS)],
        "linewidth": max(1.0, 3.5 - 1.2 * rank),
        "markersize": max(3.0, 7.0 - 2.0 * rank),
        "label": f"rank {rank}",
    }


def plot_dp_syncs_per_rank(run: RunData) -> Figure:
    """Syncs in each measured step, one line per rank; one panel per DP cell."""
    per = syncs_per_rank_step(run)
    if per.empty:
        return empty(new_figure(8, 2), "no measured steps in counts.csv")
    labels = [c for c in dp_cells(run)["label"] if c in set(per["label"])]
    ncols = min(2, len(labels))
    nrows = -(-len(labels) // ncols)
    fig = new_figure(6 * ncols, 2.6 * nrows + 1.2)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    for ax, lab in zip(axes, labels):
        d = per[per["label"] == lab]
        for rank, g in d.groupby("rank"):
            g = g.sort_values("step")
            ax.step(g["step"], g["syncs"], where="mid", marker="o", **_rank_style(int(rank)))
        ax.set_ylim(bottom=0)
        ax.set_title(lab, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("measured step")
        ax.set_ylabel("syncs in the step")
        ax.grid(alpha=0.3)
    for ax in axes[len(labels) :]:
        ax.axis("off")
    handles, names = shared_legend_entries(axes)
    fig.legend(handles, names, loc="outside lower center", ncols=len(names), fontsize=8)
    title(fig, "Host-device syncs per step on each DP-attention rank (count pass)", run.label)
    return fig


def plot_dp_exchange_wait(run: RunData) -> Figure:
    """Exchange wait per rank and step: rows (backend, forward), columns without / with the
    planted sync, one line per rank."""
    wait = exchange_wait(run)
    if wait.empty:
        return empty(new_figure(8, 2), f"no time-pass samples of {EXCHANGE_REGION}")
    cells = dp_cells(run)
    cells = cells[cells["label"].isin(set(wait["label"]))]
    rows = list(cells.groupby(["scenario", "backend", "forward_us"], sort=False).groups)
    cols = sorted(set(cells["injected"]))
    fig = new_figure(6 * len(cols), 2.8 * len(rows) + 1.2)
    axes = fig.subplots(len(rows), len(cols), squeeze=False)
    inject = run.meta["dp"].get("inject")
    planted = (
        f"with {inject['kind']}() on rank {inject['rank']}" if inject else "with the planted sync"
    )
    several = cells["scenario"].nunique() > 1  # runs shown together: name each row's
    for i, (scenario, backend, forward) in enumerate(rows):
        in_row = cells[
            (cells["scenario"] == scenario)
            & (cells["backend"] == backend)
            & (cells["forward_us"] == forward)
        ]
        row_values = wait.loc[wait["label"].isin(set(in_row["label"])), "us"]
        for j, injected in enumerate(cols):
            ax = axes[i][j]
            labels = set(in_row.loc[in_row["injected"] == injected, "label"])
            _wait_panel(ax, wait[wait["label"].isin(labels)])
            maybe_log(ax, row_values)  # one scale per row
            what = planted if injected else "without a planted sync"
            head = f"{scenario} · " if several else ""
            ax.set_title(f"{head}{backend} · forward {forward:g} µs · {what}", fontsize=9)
        lows = [ax.get_ylim()[0] for ax in axes[i]]
        highs = [ax.get_ylim()[1] for ax in axes[i]]
        for ax in axes[i]:  # the same scale within a row: with and without side by side
            ax.set_ylim(min(lows), max(highs))
    handles, names = shared_legend_entries(axes.ravel())
    fig.legend(handles, names, loc="outside lower center", ncols=len(names), fontsize=8)
    note = " (emulated device: host times only)" if run.is_emulated else ""
    title(
        fig, f"Time each rank waits in the exchange ({EXCHANGE_REGION}), per step{note}", run.label
    )
    return fig


def _wait_panel(ax, d: pd.DataFrame) -> None:
    for rank, g in d.groupby("rank"):
        g = g.sort_values("step")
        ax.plot(g["step"], g["us"], marker=".", **_rank_style(int(rank)))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("measured step")
    ax.set_ylabel("exchange wait (µs)")
    ax.grid(alpha=0.3)
