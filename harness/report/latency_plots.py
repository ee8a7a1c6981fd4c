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


def _dodge(b: np.ndarray, shift, span: float, logx: bool) -> np.ndarray:
    """Batch sizes moved sideways by `shift` (a fraction of an octave on a log axis)."""
    return b * 2**shift if logx else b + shift * span


def plot_latency_vs_batch(latency: pd.DataFrame, label: str = "", emulated: bool = False) -> Figure:
    """Every per-step sample against batch size (jittered), with the median per variant and its
    95% bootstrap interval (two medians whose intervals are apart differ beyond noise)."""
    steps = tables.step_latency(latency)
    if steps.empty:
        return empty(new_figure(8, 2), _NO_TIME)
    metric = tables.headline_metric(steps)
    steps = steps[steps["metric"] == metric]
    div, unit = time_unit(steps["value_us"])
    steps = steps.assign(t=steps["value_us"] / div)
    med = tables.median_intervals(steps)
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
            off = (i - (len(labs) - 1) / 2) * 0.06
            span = max(sizes[-1] - sizes[0], 1)
            b = dv["batch_size"].to_numpy(dtype=float)
            jitter = off + rng.uniform(-0.02, 0.02, len(b))
            color = variant_color(lab, i)
            ax.scatter(_dodge(b, jitter, span, logx), dv["t"], s=5, alpha=0.25, color=color)
            m = med[(med["scenario"] == s) & (med["label"] == lab)].sort_values("batch_size")
            y = m["p50_us"] / div
            ax.errorbar(
                _dodge(m["batch_size"].to_numpy(dtype=float), off, span, logx),
                y,
                yerr=[y - m["lo_us"] / div, m["hi_us"] / div - y],
                capsize=3,
                color=color,
                label=f"{lab} median, 95% CI",
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
        f"Latency against batch size — {_metric_name(metric, emulated)}; dots: every step; "
        "bars: 95% bootstrap interval of the median",
        label,
    )
    return fig
