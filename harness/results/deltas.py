"""A cell against a reference cell: Δ syncs per decode step and per prefill step (exact: the
count pass is deterministic), and Δ p50 step time with its 95% bootstrap interval
(harness.results.stats: paired by step, difference of medians). Within one run the
reference is `before`; `compare` takes run A's cell as the reference of run B's."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results.rates import CELL, KIND_ORDER, steps_per_kind, total_per_kind_step
from harness.results.samples import cell_series, headline_metric
from harness.results.stats import Interval, median_difference, unpaired_median_difference

REFERENCE_VARIANT = "before"
MINUS = "\u2212"  # printed deltas use the minus sign, as the figures do


def variant_label(variant: str, mirror: str, mirrors: set[str]) -> str:
    """'after' or 'after (mirror=absent)' when a run mixes mirror settings."""
    return variant if len(mirrors) <= 1 else f"{variant} (mirror={mirror})"


def signed(value: float, digits: int = 0) -> str:
    """+1.00 / −1.00 (a true minus sign); 0 prints as +0."""
    text = f"{abs(value):.{digits}f}"
    return f"{MINUS if value < 0 and float(text) != 0 else '+'}{text}"


@dataclass(frozen=True)
class CellRates:
    """What the delta needs of one cell: syncs per step of each kind, and its step times."""

    per_kind: dict[str, float]  # step kind -> syncs per step of that kind
    times: pd.Series  # headline metric per step, µs (empty without a time pass)


def cell_rates(counts: pd.DataFrame, steps: pd.DataFrame, metric: str) -> dict[tuple, CellRates]:
    """CellRates of every cell of a run (cells of the count pass and of the time pass)."""
    per = total_per_kind_step(counts)
    rates: dict[tuple, dict[str, float]] = {}
    for r in per.itertuples(index=False):
        rates.setdefault(tuple(getattr(r, k) for k in CELL), {})[r.step_kind] = r.per_step
    # a kind with steps but no sync rows still has a rate of 0
    for r in steps_per_kind(counts).itertuples(index=False):
        rates.setdefault(tuple(getattr(r, k) for k in CELL), {}).setdefault(r.step_kind, 0.0)
    # the runner's cell order (variant-major), counted cells first
    order = pd.concat([counts[CELL], steps[CELL]]).drop_duplicates()
    timed = {tuple(c) for c in steps[CELL].drop_duplicates().itertuples(index=False)}
    out = {}
    for cell in (tuple(c) for c in order.itertuples(index=False)):
        times = cell_series(steps, cell, metric) if cell in timed else pd.Series(dtype=float)
        out[cell] = CellRates(rates.get(cell, {}), times)
    return out


def _sync_delta(ref: CellRates, cell: CellRates, kind: str) -> str:
    name = f"syncs per {kind} step" if kind == KIND_ORDER[0] else f"per {kind} step"
    if kind not in ref.per_kind and kind not in cell.per_kind:
        return f"no {kind} steps"
    if kind not in ref.per_kind or kind not in cell.per_kind:
        side = "reference" if kind not in ref.per_kind else "this cell"
        return f"{name} n/a (no {kind} steps in {side})"
    return f"{signed(cell.per_kind[kind] - ref.per_kind[kind], 2)} {name}"


def format_time_delta(ci: Interval) -> str:
    """`Δ p50 = −412 µs [95% CI −530, −290]`, with the verdict when the interval holds 0."""
    if ci.n == 0:
        return "Δ p50: no common timed steps"
    digits = 0 if max(abs(ci.low), abs(ci.high), abs(ci.estimate)) >= 100 else 1
    if ci.low != ci.low:  # a single paired step: no interval
        return f"Δ p50 = {signed(ci.estimate, digits)} µs (1 step: no interval)"
    text = (
        f"Δ p50 = {signed(ci.estimate, digits)} µs "
        f"[95% CI {signed(ci.low, digits)}, {signed(ci.high, digits)}]"
    )
    return text if ci.excludes_zero else f"{text}: no measurable difference"


def delta_line(head: str, ref: CellRates, cell: CellRates, paired: bool = True) -> str:
    """One line: `{head}: −1.00 syncs per decode step, +0.00 per prefill step; Δ p50 = …`;
    the interval paired by step unless the two cells' steps are not the same work."""
    if ref.per_kind or cell.per_kind:
        syncs = ", ".join(_sync_delta(ref, cell, k) for k in KIND_ORDER)
    else:
        syncs = "no count pass"
    if ref.times.empty or cell.times.empty:
        return f"{head}: {syncs}; no time pass"
    difference = median_difference if paired else unpaired_median_difference
    return f"{head}: {syncs}; {format_time_delta(difference(ref.times, cell.times))}"


def _reference(cells: list[tuple], rates: dict[tuple, CellRates]) -> tuple | None:
    """The `before` cell to compare against: mirror auto if it ran, else the first that ran."""
    ran = [c for c in cells if rates[c].per_kind or not rates[c].times.empty]
    before = [c for c in ran if c[1] == REFERENCE_VARIANT]
    auto = [c for c in before if c[2] == "auto"]
    return (auto or before or [None])[0]


def against_before(counts: pd.DataFrame, steps: pd.DataFrame) -> list[str]:
    """Per scenario and batch size, each cell against `before` (one line each); empty when
    the run has no `before` cells (e.g. the sync-cost experiment)."""
    if REFERENCE_VARIANT not in set(counts["variant"]) | set(steps["variant"]):
        return []
    metric = headline_metric(steps)
    rates = cell_rates(counts, steps, metric)
    mirrors = {c[2] for c in rates}
    groups: dict[str, dict[tuple, list[tuple]]] = {}
    for c in rates:  # scenario -> (batch size, rank) -> cells, in the runner's order
        groups.setdefault(c[0], {}).setdefault((c[3], c[4]), []).append(c)
    lines = []
    for scenario, by_size in groups.items():
        lines.append(f"scenario {scenario} (Δ = cell − before; {metric} time per step):")
        for (bs, rank), group in sorted(by_size.items()):
            where = f"  bs={bs}" + (f" rank={rank}" if rank else "")
            lines.extend(_group_lines(where, group, rates, mirrors))
    return lines


def _group_lines(where: str, group: list[tuple], rates: dict, mirrors: set[str]) -> list[str]:
    ref = _reference(group, rates)
    if ref is None:
        return [f"{where}: no `before` cell ran, nothing to compare with"]
    ref_name = variant_label(ref[1], ref[2], mirrors)
    lines = []
    for c in group:
        if c == ref:
            continue
        head = f"{where} {variant_label(c[1], c[2], mirrors)} vs {ref_name}"
        if not rates[c].per_kind and rates[c].times.empty:
            lines.append(f"{head}: the cell did not run (see failed cells)")
        else:
            lines.append(delta_line(head, rates[ref], rates[c]))
    return lines
