"""Shared look of the figures: one colour per variant everywhere (by its place in the worlds'
vocabulary, harness.results.vocabulary), titles that say the device."""

from __future__ import annotations

import textwrap

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from harness.report.tables import label_parts
from harness.results.vocabulary import known_vocabulary

# by a variant's place in the vocabulary: red for the reference, then orange, green, ...
VARIANT_COLORS = ["#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#e377c2"]
METRIC_COLORS = {"host": "#1f77b4", "device": "#9467bd", "e2e": "#8c564b"}
METRIC_NAMES = {
    "host": "host time",
    "device": "device time (CUDA events)",
    "e2e": "end-to-end step time",
}
_FALLBACK = ["#17becf", "#7f7f7f", "#bcbd22", "#e377c2", "#1f77b4"]
# A range wider than this (max/min) is drawn on a log axis so small values stay readable.
LOG_RANGE = 20.0


# by the same place: largest first, so equal values stay visible when overlaid
VARIANT_MARKERS = [("o", 9), ("s", 7), ("^", 5)]


def _place(label: str) -> int | None:
    """A label's variant's place in the vocabulary (None: no known variant)."""
    variants = known_vocabulary().variants
    base, _ = label_parts(label)
    return variants.index(base) if base in variants else None


def variant_marker(label: str) -> dict:
    """Marker and size per variant, largest first, so equal values stay visible when overlaid."""
    i = _place(label)
    marker, size = VARIANT_MARKERS[i] if i is not None and i < len(VARIANT_MARKERS) else ("D", 5)
    return {"marker": marker, "markersize": size}


# A run that sweeps the mirror labels variants "after (mirror=absent)": same colour as the
# variant, told apart by hatching (bars) and line style (lines); by the setting's place in the
# vocabulary (the first, what upstream runs, is plain).
_MIRROR_STYLE = [("", "-"), ("..", "--"), ("//", ":")]


def _mirror_style(label: str) -> tuple[str, str]:
    mirrors = known_vocabulary().mirrors
    _, mirror = label_parts(label)
    i = mirrors.index(mirror) if mirror in mirrors else 0
    return _MIRROR_STYLE[i] if i < len(_MIRROR_STYLE) else _MIRROR_STYLE[-1]


def variant_hatch(label: str) -> dict:
    hatch = _mirror_style(label)[0]
    return {"hatch": hatch, "edgecolor": "white"} if hatch else {}


def variant_line(label: str) -> dict:
    return {"linestyle": _mirror_style(label)[1]}


def time_unit(values_us) -> tuple[float, str]:
    """(divisor, unit) so that typical values read as small numbers: µs, or ms from 10 ms up."""
    pos = [float(v) for v in values_us if v == v and v > 0]
    pos.sort()
    return (1e3, "ms") if pos and pos[len(pos) // 2] >= 1e4 else (1.0, "µs")


def variant_color(label: str, i: int = 0) -> str:
    place = _place(label)
    if place is not None and place < len(VARIANT_COLORS):
        return VARIANT_COLORS[place]
    return _FALLBACK[i % len(_FALLBACK)]


def new_figure(width: float, height: float) -> Figure:
    """A figure not registered with pyplot, so report runs never leak open figures."""
    return Figure(figsize=(width, height), layout="constrained")


def title(fig: Figure, what: str, label: str) -> None:
    """Title over the whole figure, wrapped to its width so it is never cut off."""
    chars = int(fig.get_figwidth() * 11)  # ~11 characters per inch at 11 pt
    fig.suptitle("\n".join([*textwrap.wrap(what, chars), label]), fontsize=11)


def panel_width(n_panels: int, per_panel: float = 5.5, minimum: float = 8.0) -> float:
    """Figure width for n side-by-side panels; wide enough for a two-line title."""
    return max(per_panel * n_panels, minimum)


def maybe_log(ax: Axes, values, axis: str = "y") -> None:
    """Log scale when the positive values span more than LOG_RANGE."""
    pos = [float(v) for v in values if v == v and v > 0]
    if pos and max(pos) / min(pos) > LOG_RANGE:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        # plain numbers (400, not 4×10²): these axes span a few decades at most
        target = ax.yaxis if axis == "y" else ax.xaxis
        target.set_major_formatter(LogFormatter(labelOnlyBase=False))
        target.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def empty(fig: Figure, message: str) -> Figure:
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, wrap=True)
    return fig


def shared_legend_entries(axes) -> tuple[list, list[str]]:
    """Legend handles of all panels, each label once (panels may hold different variants)."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(name, handle)
    return list(seen.values()), list(seen)


def batch_size_ticks(ax, sizes, labels=None) -> None:
    """Batch sizes as x ticks; on a log axis close neighbours (256, 300) would overprint, so
    a label closer than 25% to the previous one drops to a second line."""
    labels = labels or [str(int(b)) for b in sizes]
    shown, prev, lowered = [], None, False
    for b, text in zip(sizes, labels):
        close = prev is not None and ax.get_xscale() == "log" and b < prev * 1.25
        lowered = close and not lowered
        shown.append("\n" + text if lowered else text)
        prev = b
    ax.set_xticks(list(sizes), shown)
