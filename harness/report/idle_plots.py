"""Where a traced step's device time goes: kernels, the idle each sync site caused, the other
idle (harness.results.waits.step_breakdown), one bar per cell."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from harness.report.style import empty, new_figure, title
from harness.results.deltas import cell_name
from harness.results.samples import CELL
from harness.results.waits import step_breakdown

_FIXED = {"kernels": "#4c72b0", "other idle": "#c7c7c7"}
_SITES = ["#dd8452", "#c44e52", "#8172b3", "#937860", "#da8bc3"]


def plot_step_breakdown(
    traced_waits: pd.DataFrame, traced_latency: pd.DataFrame, label: str = ""
) -> Figure:
    parts = step_breakdown(traced_waits, traced_latency)
    if parts.empty:
        return empty(new_figure(8, 2), "no traced steps (device time not measured)")
    cells = list(dict.fromkeys(tuple(c) for c in parts[CELL].itertuples(index=False)))
    names = list(dict.fromkeys(parts["part"]))
    sites = [n for n in names if n not in _FIXED]
    colors = {**_FIXED, **{s: _SITES[i % len(_SITES)] for i, s in enumerate(sites)}}
    order = ["kernels", *sites, "other idle"]
    fig = new_figure(10, 1.2 + 0.45 * len(cells))
    ax = fig.subplots()
    for y, cell in enumerate(cells):
        mine = parts[(parts[CELL] == pd.Series(cell, index=CELL)).all(axis=1)]
        values = dict(zip(mine["part"], mine["us_per_step"]))
        left = 0.0
        for part in order:
            width = max(0.0, float(values.get(part, 0.0)))
            ax.barh(y, width, left=left, color=colors[part], label=part if y == 0 else None)
            left += width
    ax.set_yticks(range(len(cells)), [cell_name(c, set()) for c in cells], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("device time per step (µs): its span from the step's start")
    ax.grid(axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    fig.legend(
        [seen[p] for p in order if p in seen],
        [p for p in order if p in seen],
        loc="outside lower center",
        ncols=3,
        fontsize=7,
    )
    title(fig, "Where a step's device time goes (traced steps; mean per step)", label)
    return fig
