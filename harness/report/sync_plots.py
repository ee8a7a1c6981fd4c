"""Figures of the count pass: syncs per step, the blame table, findings and failed cells."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from harness.report import tables
from harness.report.style import (
    batch_size_ticks,
    empty,
    new_figure,
    panel_width,
    shared_legend_entries,
    title,
    variant_color,
    variant_hatch,
    variant_line,
    variant_marker,
)

_TOTAL = "all regions (total)"


def _short(region: str) -> str:
    return region.removeprefix("step/") or region


def plot_syncs_by_region(counts: pd.DataFrame, label: str = "") -> Figure:
    """Grouped bars: syncs per step for each region and forward mode, variants side by side."""
    df = tables.syncs_by_region(counts)
    if df.empty:
        return empty(new_figure(8, 3), "no measured steps in counts.csv")
    scenarios = sorted(df["scenario"].unique())
    labels = tables.order_variants(list(df["label"]))
    rows_per = {}
    for s in scenarios:
        d = df[df["scenario"] == s]
        hot = d.groupby(["region", "forward_mode"])["syncs_per_step"].max()
        rows_per[s] = [_TOTAL] + [f"{_short(r)}  [{m}]" for (r, m), v in hot.items() if v > 0]
    n_rows = max(len(v) for v in rows_per.values())
    fig = new_figure(panel_width(len(scenarios), 7.0), 1.2 + 0.45 * n_rows * len(labels) ** 0.5 + 1)
    axes = np.atleast_1d(fig.subplots(1, len(scenarios), squeeze=False)[0])
    height = 0.8 / len(labels)
    for ax, s in zip(axes, scenarios):
        d = df[df["scenario"] == s].copy()
        d["cat"] = [f"{_short(r)}  [{m}]" for r, m in zip(d["region"], d["forward_mode"])]
        cats = rows_per[s]
        y = np.arange(len(cats))
        top = 0.0
        for i, lab in enumerate(labels):
            dv = d[d["label"] == lab]
            if dv.empty:
                continue
            per_cat = dv.groupby("cat")["syncs_per_step"].sum()
            vals = [
                dv["syncs_per_step"].sum() if c == _TOTAL else per_cat.get(c, 0.0) for c in cats
            ]
            pos = y - 0.4 + height * (i + 0.5)
            ax.barh(
                pos,
                vals,
                height=height,
                color=variant_color(lab, i),
                label=lab,
                **variant_hatch(lab),
            )
            for p, v in zip(pos, vals):
                ax.text(v, p, f" {v:.2f}", va="center", fontsize=7)
            top = max(top, *vals)
        ax.set_yticks(y, cats, fontsize=8)
        ax.invert_yaxis()  # total first, then regions in order of the run
        ax.set_xlim(0, top * 1.18 if top > 0 else 1.0)
        if top == 0:
            ax.text(
                0.5,
                0.5,
                "no syncs in any measured step",
                transform=ax.transAxes,
                ha="center",
                color="grey",
            )
        ax.set_xlabel(
            "syncs per measured step (mean over steps and batch sizes)"
            + _not_per_step(counts[counts["scenario"] == s])
        )
        ax.set_title(f"scenario: {s}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    handles, names = shared_legend_entries(axes)
    fig.legend(
        handles,
        names,
        title="variant",
        fontsize=8,
        loc="outside lower center",
        ncols=min(len(names), 3),
    )
    title(fig, "Host-device syncs per step by region [forward mode]", label)
    return fig


def _not_per_step(counts: pd.DataFrame) -> str:
    """Second x-label line: syncs of warm-up and capture, which are not per-step costs."""
    setup = counts[counts["path"].isin(tables.NOT_MEASURED) | (counts["step"] < 0)]
    by = setup.groupby("path")["syncs"].sum()
    what = ", ".join(f"{int(n)} in {p}" for p, n in by.items() if n)
    return f"\nnot shown (not per step), all cells: {what}" if what else ""


def plot_syncs_vs_batch(counts: pd.DataFrame, label: str = "") -> Figure:
    """Total syncs per step against batch size, one line per variant."""
    df = tables.total_syncs_by_batch(counts)
    if df.empty:
        return empty(new_figure(8, 3), "no measured steps in counts.csv")
    scenarios = sorted(df["scenario"].unique())
    eager = tables.eager_batch_sizes(counts)
    fig = new_figure(panel_width(len(scenarios)), 4)
    axes = fig.subplots(1, len(scenarios), squeeze=False)[0]
    for ax, s in zip(axes, scenarios):
        d = df[df["scenario"] == s]
        for i, lab in enumerate(tables.order_variants(list(d["label"]))):
            dv = d[d["label"] == lab].sort_values("batch_size")
            ax.plot(
                dv["batch_size"],
                dv["syncs_per_step"],
                color=variant_color(lab, i),
                label=lab,
                **variant_marker(lab),
                **variant_line(lab),
            )
        sizes = sorted(d["batch_size"].unique())
        if len(sizes) > 1 and sizes[-1] / max(sizes[0], 1) > 8:
            ax.set_xscale("log", base=2)
        # Batch sizes above the largest graph bucket run decode/verify eagerly: say so on the
        # tick itself, where the reader looks when a line jumps.
        eager_here = set(eager.get(s, []))
        ticks = [f"{int(b)}\n(eager)" if b in eager_here else str(int(b)) for b in sizes]
        batch_size_ticks(ax, sizes, ticks)
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("batch size (requests)")
        ax.set_ylabel("syncs per measured step")
        ax.set_title(f"scenario: {s}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(title="variant", fontsize=8)
    title(fig, "Syncs per step against batch size", label)
    return fig


def plot_blame(syncs: pd.DataFrame, counts: pd.DataFrame, label: str = "", top: int = 25) -> Figure:
    """The sync blame table: which source line syncs, of which kind, how often per step."""
    t = tables.blame_table(syncs, counts)
    if t.empty:
        return empty(new_figure(9, 2), "no syncs in measured steps — nothing to blame")
    variants = [c for c in t.columns if c.split(" ")[0] in tables.VARIANT_ORDER]
    t["regions"] = t["regions"].str.replace("step/", "", regex=False)
    cols = ["location", "function", "kind", "op", "regions", "forward_modes", *variants]
    if t["scenario"].nunique() > 1:
        cols = ["scenario", *cols]
    shown = t.head(top)
    cells = [
        [f"{v:.2f}" if c in variants else str(v) for c, v in zip(cols, row)]
        for row in shown[cols].itertuples(index=False)
    ]
    # Size the figure to the text so the table neither overflows nor floats in white space.
    chars = [max(len(c), *(len(r[j]) for r in cells)) for j, c in enumerate(cols)]
    fig = new_figure(min(0.075 * sum(chars) + 0.3 * len(cols), 24), 1.0 + 0.24 * (len(shown) + 1))
    ax = fig.subplots()
    ax.axis("off")
    tab = ax.table(
        cellText=cells,
        colLabels=cols,
        loc="center",
        cellLoc="left",
        colWidths=[c / sum(chars) for c in chars],
        bbox=[0, 0, 1, 1],
    )
    tab.auto_set_font_size(False)
    tab.set_fontsize(8)
    for j, c in enumerate(cols):
        tab[0, j].set_text_props(weight="bold")
        if c in variants:
            tab[0, j].set_facecolor(variant_color(c))
            tab[0, j].set_alpha(0.35)
            for i in range(1, len(cells) + 1):
                tab[i, j].set_text_props(ha="right")
    more = f" (top {top} of {len(t)})" if len(t) > top else ""
    title(fig, f"Sync blame: syncs per measured step by source line{more}", label)
    return fig


def plot_findings(
    findings: pd.DataFrame, counts: pd.DataFrame, outcomes: pd.DataFrame, label: str = ""
) -> Figure:
    """Stale-mirror (and other) findings per step by batch size, plus the cells that failed."""
    f = tables.findings_per_cell(findings, counts)
    failed = tables.failed_cells(outcomes)
    scenarios = sorted(set(f["scenario"]) | set(failed["scenario"]))
    if not scenarios:
        return empty(new_figure(8, 2), "no cells in this run")
    lines = [
        f"FAILED ({r.get('pass', '?')} pass)  {r['scenario']} · {r['variant']} · mirror={r['mirror']}"
        f" · batch size {r['batch_size']}: {r.get('exception', '')}: {r.get('message', '')}"
        f"  at {r.get('location', '')} in {r.get('function', '')}"
        for r in failed.to_dict("records")
    ] or ["every cell ran to the end"]
    width = panel_width(len(scenarios))
    # monospace 8 pt: ~15 characters per inch; wrap so no failure is cut at the edge
    lines = [
        w for line in lines for w in textwrap.wrap(line, int(width * 15), subsequent_indent="    ")
    ]
    fig = new_figure(width, 4.4 + 0.2 * len(lines))
    top, bottom = fig.subfigures(2, 1, height_ratios=[4.0, 0.25 + 0.2 * len(lines)])
    axes = top.subplots(1, len(scenarios), squeeze=False)[0]
    for ax, s in zip(axes, scenarios):
        _findings_panel(ax, f[f["scenario"] == s], s)
    note = bottom.subplots()
    note.axis("off")
    color = "#a00" if len(failed) else "#444"
    note.text(0, 1, "\n".join(lines), fontsize=8, va="top", color=color, family="monospace")
    title(fig, "Findings (stale host mirror read by the graph runner) and failed cells", label)
    return fig


def _findings_panel(ax: Axes, d: pd.DataFrame, scenario: str) -> None:
    sizes = sorted(d["batch_size"].unique())
    labs = tables.order_variants(list(d["label"]))
    kinds = sorted(d["kind"].unique())
    groups = [(lab, k) for lab in labs for k in kinds]
    width = 0.8 / max(len(groups), 1)
    x = np.arange(len(sizes))
    for i, (lab, kind) in enumerate(groups):
        dv = d[(d["label"] == lab) & (d["kind"] == kind)].set_index("batch_size")
        vals = [dv["per_step"].get(b, np.nan) for b in sizes]
        pos = x - 0.4 + width * (i + 0.5)
        name = lab if len(kinds) == 1 else f"{lab}: {kind}"
        ax.bar(pos, vals, width, color=variant_color(lab, i), label=name, **variant_hatch(lab))
        for p, v in zip(pos, vals):  # write the zeros too: an absent bar is not "no data"
            if v != v:
                ax.text(p, 0, "no data\n(failed)", ha="center", va="bottom", fontsize=6)
            elif d["findings"].any():
                ax.text(p, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6)
    ax.set_xticks(x, [str(int(b)) for b in sizes])
    ax.set_ylim(0, max(0.1, float(d["per_step"].max() or 0) * 1.25))
    ax.set_xlabel("batch size (requests)")
    ax.set_ylabel(f"{', '.join(kinds)} findings per measured step")
    ax.set_title(f"scenario: {scenario}", fontsize=10)
    if not d["findings"].any():
        ax.text(0.5, 0.5, "no findings", transform=ax.transAxes, ha="center", color="grey")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="variant", fontsize=8)
