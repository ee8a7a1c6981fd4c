"""Figures of the time pass: raw per-step samples, never with outliers removed."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from harness.report import tables
from harness.report.style import (
    METRIC_COLORS,
    METRIC_NAMES,
    batch_size_ticks,
    empty,
    maybe_log,
    new_figure,
    panel_width,
    shared_legend_entries,
    time_unit,
    title,
    variant_color,
    variant_line,
    variant_marker,
)

_NO_TIME = "no time-pass samples in latency.csv (count-only run?)"


def _metric_name(metric: str, emulated: bool) -> str:
    name = METRIC_NAMES.get(metric, metric)
    return f"{name} (emulated device: host only)" if emulated and metric == "host" else name


def plot_latency_ecdf(latency: pd.DataFrame, label: str = "", emulated: bool = False) -> Figure:
    """ECDF of per-step time per variant; one panel per (scenario, batch size)."""
    steps = tables.step_latency(latency)
    if steps.empty:
        return empty(new_figure(8, 2), _NO_TIME)
    metric = tables.headline_metric(steps)
    steps = steps[steps["metric"] == metric].copy()
    div, unit = time_unit(steps["value_us"])
    steps["t"] = steps["value_us"] / div
    panels = sorted({(s, int(b)) for s, b in zip(steps["scenario"], steps["batch_size"])})
    ncols = min(4, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = new_figure(max(4 * ncols, 8), 3.2 * nrows + 0.8)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (s, b) in zip(axes, panels):
        d = steps[(steps["scenario"] == s) & (steps["batch_size"] == b)]
        for i, lab in enumerate(tables.order_variants(list(d["label"]))):
            v = np.sort(d.loc[d["label"] == lab, "t"].to_numpy())
            ax.step(
                v,
                np.arange(1, len(v) + 1) / len(v),
                where="post",
                color=variant_color(lab, i),
                label=lab,
                **variant_line(lab),
            )
        maybe_log(ax, d["t"], axis="x")
        ax.xaxis.set_major_locator(MaxNLocator(5))
        n = d.groupby("label").size()
        ns = "/".join(str(v) for v in sorted(set(n)))
        ax.set_title(f"{s} · batch size {b} · n={ns}", fontsize=9)
        ax.set_xlabel(f"{metric} time per step ({unit})")
        ax.set_ylabel("fraction of steps ≤ x")
        ax.grid(alpha=0.3)
    for ax in axes[len(panels) :]:
        ax.axis("off")
    # One legend for all panels, outside them, so no curve hides behind it.
    handles, names = shared_legend_entries(axes)
    fig.legend(
        handles,
        names,
        loc="outside lower center",
        ncols=min(len(names), 3),  # wider rows run off the figure with mirror sweeps
        fontsize=8,
        title="variant (n = steps per variant, in each title)",
    )
    title(fig, f"Per-step latency, ECDF of raw samples — {_metric_name(metric, emulated)}", label)
    return fig


def plot_host_device_e2e(latency: pd.DataFrame, label: str = "", emulated: bool = False) -> Figure:
    """Box plots (every sample beyond the whiskers drawn) of host, device and e2e per step."""
    steps = tables.step_latency(latency)
    if steps.empty:
        return empty(new_figure(8, 2), _NO_TIME)
    metrics = [m for m in tables.METRICS if m in set(steps["metric"])]
    div, unit = time_unit(steps["value_us"])
    steps = steps.assign(t=steps["value_us"] / div)
    cols = [
        (s, lab)
        for s in sorted(steps["scenario"].unique())
        for lab in tables.order_variants(list(steps.loc[steps["scenario"] == s, "label"]))
    ]
    ncols = min(len(cols), 3)  # wrap: a mirror sweep has up to 9 (variant, mirror) panels
    nrows = -(-len(cols) // ncols)
    fig = new_figure(max(4.5 * ncols, 8), 3.8 * nrows + 0.8)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    width = 0.8 / len(metrics)
    for ax, (s, lab) in zip(axes, cols):
        d = steps[(steps["scenario"] == s) & (steps["label"] == lab)]
        sizes = sorted(d["batch_size"].unique())
        for j, m in enumerate(metrics):
            data = [d.loc[(d["batch_size"] == b) & (d["metric"] == m), "t"] for b in sizes]
            pos = np.arange(len(sizes)) - 0.4 + width * (j + 0.5)
            bp = ax.boxplot(
                data,
                positions=pos,
                widths=width * 0.9,
                patch_artist=True,
                flierprops={"markersize": 2},
                medianprops={"color": "black"},
            )
            for box in bp["boxes"]:
                box.set_facecolor(METRIC_COLORS[m])
                box.set_alpha(0.7)
            # a tight distribution draws its box as a line: the coloured median dot still
            # says which metric it is
            meds = [float(x.median()) if len(x) else np.nan for x in data]
            ax.scatter(pos, meds, s=22, color=METRIC_COLORS[m], edgecolor="black", zorder=3)
        ax.set_xticks(np.arange(len(sizes)), [str(int(b)) for b in sizes])
        ax.set_xlabel("batch size (requests)")
        ax.set_title(f"{s} · {lab}", fontsize=10, color=variant_color(lab))
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(cols) :]:
        ax.axis("off")
    maybe_log(axes[0], steps["t"])
    for ax in axes[::ncols]:
        ax.set_ylabel(f"time per step ({unit})")
    handles = [
        Patch(color=METRIC_COLORS[m], alpha=0.7, label=_metric_name(m, emulated)) for m in metrics
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(metrics), fontsize=8)
    what = (
        "Host vs device vs end-to-end time per step"
        if not emulated
        else ("Host time per step — emulated device: no device or end-to-end time")
    )
    title(fig, f"{what} (box: quartiles; whiskers: 1.5 IQR; dots: every sample beyond)", label)
    return fig


def plot_latency_vs_batch(latency: pd.DataFrame, label: str = "", emulated: bool = False) -> Figure:
    """Every per-step sample against batch size (jittered), with the median per variant."""
    steps = tables.step_latency(latency)
    if steps.empty:
        return empty(new_figure(8, 2), _NO_TIME)
    metric = tables.headline_metric(steps)
    steps = steps[steps["metric"] == metric]
    div, unit = time_unit(steps["value_us"])
    steps = steps.assign(t=steps["value_us"] / div)
    scenarios = sorted(steps["scenario"].unique())
    fig = new_figure(panel_width(len(scenarios)), 4.2)
    axes = fig.subplots(1, len(scenarios), squeeze=False)[0]
    rng = np.random.default_rng(0)  # jitter only; fixed so re-rendering gives the same picture
    for ax, s in zip(axes, scenarios):
        d = steps[steps["scenario"] == s]
        sizes = np.array(sorted(d["batch_size"].unique()), dtype=float)
        logx = len(sizes) > 1 and sizes[-1] / max(sizes[0], 1) > 8
        labs = tables.order_variants(list(d["label"]))
        for i, lab in enumerate(labs):
            dv = d[d["label"] == lab]
            b = dv["batch_size"].to_numpy(dtype=float)
            off = (i - (len(labs) - 1) / 2) * 0.06
            jit = rng.uniform(-0.02, 0.02, len(b)) + off
            x = b * 2**jit if logx else b + (jit * max(sizes[-1] - sizes[0], 1))
            ax.scatter(x, dv["t"], s=5, alpha=0.35, color=variant_color(lab, i))
            med = dv.groupby("batch_size")["t"].median()
            ax.plot(
                med.index,
                med.values,
                color=variant_color(lab, i),
                label=f"{lab} median",
                **variant_marker(lab),
                **variant_line(lab),
            )
        if logx:
            ax.set_xscale("log", base=2)
        batch_size_ticks(ax, sizes)
        ax.minorticks_off()
        maybe_log(ax, d["t"])
        ax.set_xlabel("batch size (requests)")
        ax.set_ylabel(f"{metric} time per step ({unit})")
        ax.set_title(f"scenario: {s}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    title(
        fig,
        f"Latency against batch size — {_metric_name(metric, emulated)}; dots: every step",
        label,
    )
    return fig


def plot_bubble_cost(
    counts: pd.DataFrame, latency: pd.DataFrame, label: str = "", emulated: bool = False
) -> Figure:
    """Median step time against syncs per step; lines join variants at one batch size."""
    steps = tables.step_latency(latency)
    if steps.empty:
        return empty(new_figure(8, 2), _NO_TIME)
    metric = tables.headline_metric(steps)
    t = tables.syncs_and_latency(counts, latency, metric)
    if t.empty:
        return empty(new_figure(8, 2), "count pass and time pass share no cell")
    div, unit = time_unit(t["p50_us"])
    t = t.assign(**{c: t[c] / div for c in ("p10_us", "p50_us", "p90_us")})  # now in `unit`
    scenarios = sorted(t["scenario"].unique())
    fig = new_figure(panel_width(len(scenarios)), 4.4)
    axes = fig.subplots(1, len(scenarios), squeeze=False)[0]
    for ax, s in zip(axes, scenarios):
        d = t[t["scenario"] == s]
        labs = tables.order_variants(list(d["label"]))
        for b, g in d.groupby("batch_size"):
            g = g.sort_values("syncs_per_step")
            ax.plot(g["syncs_per_step"], g["p50_us"], "-", color="grey", lw=0.8, alpha=0.6)
            ax.annotate(
                f"bs {int(b)}",
                (g["syncs_per_step"].iloc[-1], g["p50_us"].iloc[-1]),
                fontsize=7,
                color="grey",
                xytext=(6 + 4 * len(labs), 0),
                textcoords="offset points",
                va="center",
            )
        for i, lab in enumerate(labs):
            g = d[d["label"] == lab]
            err = [g["p50_us"] - g["p10_us"], g["p90_us"] - g["p50_us"]]
            # dodge variants sideways a little: equal sync counts would hide each other
            dx = (i - (len(labs) - 1) / 2) * 0.04
            ax.errorbar(
                g["syncs_per_step"] + dx,
                g["p50_us"],
                yerr=err,
                linestyle="none",
                capsize=2,
                color=variant_color(lab, i),
                label=lab,
                **variant_marker(lab),
                **({"mfc": "white"} if "mirror=" in lab and "mirror=auto" not in lab else {}),
            )
        slope = tables.cost_per_sync_us(d) * div  # back to µs: one sync is µs-sized
        if emulated:  # host-time gaps between variants there are code, not a sync's wait
            note = "not fitted on the emulated device (a sync costs no wait there)"
        elif slope != slope:
            note = "n/a — at each batch size all variants make the same syncs per step"
        else:
            note = f"{slope:+.1f} µs per extra sync per step (variants at the same batch size)"
        ax.set_title(f"scenario: {s}\nfitted cost: {note}", fontsize=9)
        maybe_log(ax, [d["p10_us"].min(), d["p90_us"].max()])
        lo, hi = float(d["syncs_per_step"].min()), float(d["syncs_per_step"].max())
        ax.set_xlim(lo - max(0.5, 0.1 * (hi - lo)), hi + max(0.5, 0.15 * (hi - lo)))
        ax.set_xlabel("syncs per measured step (count pass)")
        ax.set_ylabel(f"{metric} time per step ({unit}), median and p10–p90")
        ax.grid(alpha=0.3)
        ax.legend(title="variant", fontsize=8)
    what = (
        "Pipeline-bubble cost of a sync"
        if not emulated
        else ("Sync cost on the host only — emulated device, so no pipeline bubble can show")
    )
    title(fig, what, label)
    return fig
