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


def _kind_title(kind: str) -> str:
    return f"per {kind} step"


def _by_rank(df: pd.DataFrame) -> bool:
    """A DP-attention run: its cells' rows differ by rank (each with its own batch), and a
    rank is not a batch size."""
    return df["rank"].nunique() > 1


def _rank_label(rank: int, batch_size: int) -> str:
    return f"rank {rank} ({f'batch {batch_size}' if batch_size else 'idle'})"


MAX_COLUMNS = 3  # panels side by side before they wrap to the next row


def plot_syncs_by_region(counts: pd.DataFrame, label: str = "") -> Figure:
    """Grouped bars: syncs per step of each kind for each region [forward mode], variants side
    by side; one row of panels per (scenario, batch size), one column per step kind."""
    df = tables.syncs_by_region(counts)
    if df.empty:
        return empty(new_figure(8, 3), "no measured steps in counts.csv")
    labels = tables.order_variants(list(df["label"]))
    kinds = [k for k in tables.KIND_ORDER if k in set(df["step_kind"])]
    kinds += sorted(set(df["step_kind"]) - set(kinds))
    df["cat"] = [f"{_short(r)}  [{m}]" for r, m in zip(df["region"], df["forward_mode"])]
    by_rank = _by_rank(df)
    rows = sorted(
        {(s, int(r), int(b)) for s, r, b in zip(df["scenario"], df["rank"], df["batch_size"])}
    )
    # the same categories in every panel of a (scenario, kind): batch sizes read across
    cats = {
        (s, k): [_TOTAL, *sorted(set(g.loc[g["syncs"] > 0, "cat"]))]
        for (s, k), g in df.groupby(["scenario", "step_kind"])
    }
    n_cats = max(len(c) for c in cats.values())
    panel_h = 0.5 + 0.16 * n_cats * len(labels)
    fig = new_figure(6.0 * len(kinds) + 1.5, panel_h * len(rows) + 1.6)
    axes = fig.subplots(len(rows), len(kinds), squeeze=False)
    top = max(float(df["per_step"].max()), 0.0)
    totals = df.groupby(["scenario", "rank", "batch_size", "step_kind", "label"])["per_step"].sum()
    for (s, r, b), row in zip(rows, axes):
        which = _rank_label(r, b) if by_rank else f"batch size {b}"
        for kind, ax in zip(kinds, row):
            d = df[
                (df["scenario"] == s)
                & (df["rank"] == r)
                & (df["batch_size"] == b)
                & (df["step_kind"] == kind)
            ]
            _region_bars(ax, d, cats.get((s, kind), [_TOTAL]), labels, totals, (s, r, b, kind))
            top = max(top, *(totals.get((s, r, b, kind, lab), 0.0) for lab in labels))
            ax.set_title(f"{s} · {which} · syncs {_kind_title(kind)}", fontsize=9)
    for ax in axes.ravel():
        ax.set_xlim(0, top * 1.25 if top > 0 else 1.0)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("syncs per measured step of that kind")
    handles, names = shared_legend_entries(axes.ravel())
    fig.legend(
        handles,
        names,
        title="variant",
        fontsize=8,
        loc="outside lower center",
        ncols=min(len(names), 3),
    )
    note = _not_per_step(counts)
    what = "Host-device syncs per step by region [forward mode], each " + (
        "rank apart" if by_rank else "batch size apart"
    )
    title(fig, f"{what} ({note})" if note else what, label)
    return fig


def _region_bars(ax: Axes, d: pd.DataFrame, cats: list[str], labels, totals, where) -> None:
    y = np.arange(len(cats))
    height = 0.8 / len(labels)
    if d.empty:
        ax.text(
            0.5, 0.5, "no steps of this kind", transform=ax.transAxes, ha="center", color="grey"
        )
    for i, lab in enumerate(labels):
        dv = d[d["label"] == lab]
        if dv.empty:
            continue
        per_cat = dv.groupby("cat")["per_step"].sum()
        vals = [
            totals.get((*where, lab), 0.0) if c == _TOTAL else per_cat.get(c, 0.0) for c in cats
        ]
        pos = y - 0.4 + height * (i + 0.5)
        ax.barh(
            pos, vals, height=height, color=variant_color(lab, i), label=lab, **variant_hatch(lab)
        )
        for p, v, c in zip(pos, vals, cats):
            if v or c == _TOTAL:  # a region's zero is the missing bar; a total says it
                ax.text(v, p, f" {v:.2f}", va="center", fontsize=7)
    ax.set_yticks(y, cats, fontsize=8)
    ax.invert_yaxis()  # total first
    if not d.empty and d["syncs"].sum() == 0:
        ax.text(
            0.5, 0.5, "no syncs in these steps", transform=ax.transAxes, ha="center", color="grey"
        )


def _not_per_step(counts: pd.DataFrame) -> str:
    """Second x-label line: syncs of warm-up and capture, which are not per-step costs."""
    setup = counts[counts["path"].isin(tables.NOT_MEASURED) | (counts["step"] < 0)]
    by = setup.groupby("path")["syncs"].sum()
    what = ", ".join(f"{int(n)} in {p}" for p, n in by.items() if n)
    return f"not shown (not per step), all cells: {what}" if what else ""


def plot_syncs_vs_batch(counts: pd.DataFrame, label: str = "") -> Figure:
    """Syncs per step of each kind against batch size, one line per variant; a panel per
    (scenario, step kind), wrapped into rows. A DP-attention run's ranks are not a batch-size
    trend: each rank is a point of its own, labelled with its rank and batch."""
    df = tables.total_syncs_by_batch(counts)
    if df.empty:
        return empty(new_figure(8, 3), "no measured steps in counts.csv")
    panels = sorted(
        {(s, k) for s, k in zip(df["scenario"], df["step_kind"])},
        key=lambda p: (p[0], tables.KIND_ORDER.index(p[1]) if p[1] in tables.KIND_ORDER else 9),
    )
    by_rank = _by_rank(df)
    eager = tables.eager_batch_sizes(counts)
    ncols = min(len(panels), MAX_COLUMNS)
    nrows = -(-len(panels) // ncols)
    fig = new_figure(panel_width(ncols), 4 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (s, kind) in zip(axes, panels):
        d = df[(df["scenario"] == s) & (df["step_kind"] == kind)]
        (_rank_panel if by_rank else _batch_panel)(ax, d, set(eager.get(s, [])))
        ax.set_ylim(bottom=0, top=max(1.0, float(d["per_step"].max()) * 1.15))
        ax.set_ylabel(f"syncs {_kind_title(kind)}")
        ax.set_title(f"scenario: {s} · {kind} steps", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(title="variant", fontsize=8)
    for ax in axes[len(panels) :]:
        ax.axis("off")
    what = "on each rank" if by_rank else "against batch size"
    title(fig, f"Syncs per step {what}, decode and prefill steps apart", label)
    return fig


def _batch_panel(ax: Axes, d: pd.DataFrame, eager_here: set[int]) -> None:
    """One line per variant over the batch sizes."""
    for i, lab in enumerate(tables.order_variants(list(d["label"]))):
        dv = d[d["label"] == lab].sort_values("batch_size")
        ax.plot(
            dv["batch_size"],
            dv["per_step"],
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
    ticks = [f"{int(b)}\n(eager)" if b in eager_here else str(int(b)) for b in sizes]
    batch_size_ticks(ax, sizes, ticks)
    ax.minorticks_off()
    ax.set_xlabel("batch size (requests)")


def _rank_panel(ax: Axes, d: pd.DataFrame, eager_here: set[int]) -> None:
    """One marker per (variant, rank), no line between ranks."""
    for i, lab in enumerate(tables.order_variants(list(d["label"]))):
        dv = d[d["label"] == lab].sort_values("rank")
        ax.plot(
            dv["rank"],
            dv["per_step"],
            color=variant_color(lab, i),
            label=lab,
            linestyle="none",
            **variant_marker(lab),
        )
    ranks = d.drop_duplicates("rank").sort_values("rank")
    ticks = [
        _rank_label(int(r), int(b)).replace(" (", "\n(") + ("\n(eager)" if b in eager_here else "")
        for r, b in zip(ranks["rank"], ranks["batch_size"])
    ]
    ax.set_xticks(list(ranks["rank"]), ticks)
    ax.set_xlim(-0.5, ranks["rank"].max() + 0.5)
    ax.set_xlabel("DP-attention rank")


def plot_blame(
    syncs: pd.DataFrame,
    counts: pd.DataFrame,
    label: str = "",
    top: int = 6,
    costs: pd.DataFrame | None = None,
) -> Figure:
    """The sync blame: per variant, the source lines that sync most (syncs per step of each
    kind, one column per batch size), the rest summed in one row; a variant that ran without
    a sync says so. With the time pass's site costs (harness.results.waits), each line's µs per
    step spent waiting there, with its interval, beside its counts, and the lines ranked by it."""
    t = tables.blame_table(syncs, counts)
    if t.empty:
        return empty(new_figure(9, 2), "no syncs in measured steps — nothing to blame")
    ran = tables.with_variant_label(tables.steps_per_cell(counts))
    sizes = sorted(int(b) for b in ran["batch_size"].unique())
    waits = tables.wait_costs(costs)
    several = ran["scenario"].nunique() > 1
    blocks = []
    for s in sorted(ran["scenario"].unique()):
        for lab in tables.order_variants(list(ran.loc[ran["scenario"] == s, "label"])):
            g = t[(t["scenario"] == s) & (t["label"] == lab)]
            w = waits[(waits["scenario"] == s) & (waits["label"] == lab)]
            rows = _blame_rows(g, sizes, top, w) if len(g) else [["no syncs in measured steps"]]
            blocks.append((f"{s} · {lab}" if several else lab, rows))
    cols = ["file:line", "function", "sync", "region", "step", *(f"bs={b}" for b in sizes)]
    if not waits.empty:
        cols += [f"wait µs/step bs={b}" for b in sizes]
    for _name, rows in blocks:
        for r in rows:
            r.extend([""] * (len(cols) - len(r)))
    chars = [
        max(len(c), *(len(r[j]) for _n, rows in blocks for r in rows)) for j, c in enumerate(cols)
    ]
    width = min(0.075 * sum(chars) + 0.25 * len(cols), 18.0)
    heights = [len(rows) + 1.6 for _n, rows in blocks]
    fig = new_figure(width, 0.22 * sum(heights) + 0.9)
    axes = fig.subplots(len(blocks), 1, squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, (name, rows) in zip(axes[:, 0], blocks):
        _blame_block(ax, name, cols, rows, [c / sum(chars) for c in chars])
    ranked = (
        "ranked by µs per step the host waited there (time pass; with --repeats, its 95% CI "
        "between processes)"
        if not waits.empty
        else "by syncs per step of the kind shown"
    )
    title(
        fig,
        f"Sync blame per variant: source lines {ranked}, each batch size apart (beyond the top "
        f"{top}, the rest summed)",
        label,
    )
    return fig


def _blame_rows(
    g: pd.DataFrame, sizes: list[int], top: int, waits: pd.DataFrame
) -> list[list[str]]:
    """Text rows of one variant: the top sites by their cost in µs per step where the time pass
    measured it, else by their largest rate; then the rest summed."""
    site = ["location", "function", "kind", "op", "step_kind"]
    wide = g.pivot_table(index=site, columns="batch_size", values="per_step", aggfunc="sum")
    wide = wide.reindex(columns=sizes)
    regions = g.groupby(site)["regions"].agg(
        lambda r: ", ".join(sorted(set(", ".join(r).split(", "))))
    )
    us = waits.pivot_table(index=["location", "kind"], columns="batch_size", values="us_per_step")
    text = waits.set_index(["location", "kind", "batch_size"])["text"]
    cost = [us.loc[(k[0], k[2])].max() if (k[0], k[2]) in us.index else -1.0 for k in wide.index]
    order = (
        pd.DataFrame({"cost": cost, "rate": wide.max(axis=1).to_numpy()}, index=wide.index)
        .sort_values(["cost", "rate"], ascending=False)
        .index
    )
    rows, shown = [], set()
    for key in order[:top]:
        loc, fn, kind, op, step = key
        where = regions[key].replace("step/", "")
        row = [loc, fn, f"{kind} {op}", where, step, *(_rate(v) for v in wide.loc[key])]
        if not waits.empty:  # a line's wait is per measured step: shown on its first row
            first = (loc, kind) not in shown
            shown.add((loc, kind))
            row += [str(text.get((loc, kind, b), "")) if first else "" for b in sizes]
        rows.append(row)
    rest = wide.loc[order[top:]]
    if len(rest):
        sums = rest.groupby(level="step_kind").sum(min_count=1)
        for step, vals in sums.iterrows():
            n = int((rest.index.get_level_values("step_kind") == step).sum())
            rows.append([f"{n} other line(s)", "", "", "", step, *(_rate(v) for v in vals)])
    return rows


def _rate(v: float) -> str:
    return "" if v != v else f"{v:.2f}"


def _blame_block(ax: Axes, name: str, cols: list[str], rows: list[list[str]], widths) -> None:
    ax.axis("off")
    tab = ax.table(
        cellText=rows,
        colLabels=cols,
        loc="upper center",
        cellLoc="left",
        colWidths=widths,
        bbox=[0, 0, 1, 1],
    )
    tab.auto_set_font_size(False)
    tab.set_fontsize(8)
    for j, c in enumerate(cols):
        tab[0, j].set_text_props(weight="bold")
        tab[0, j].set_facecolor(variant_color(name.split(" · ")[-1]))
        tab[0, j].set_alpha(0.35)
        if c.startswith("bs="):
            for i in range(1, len(rows) + 1):
                tab[i, j].set_text_props(ha="right")
    ax.set_title(f"{name}", fontsize=10, loc="left", color=variant_color(name.split(" · ")[-1]))


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
