"""A cell against a reference cell: Δ syncs per decode step and per prefill step (exact: the
count pass is deterministic), and Δ p50 step time with its 95% bootstrap interval
(harness.results.stats: paired by step, difference of medians). Within one run the
reference is the world's reference variant (its vocabulary); `compare` takes run A's cell as
the reference of run B's."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results.rates import CELL, KIND_ORDER, steps_per_kind, total_per_kind_step
from harness.results.samples import cell_series, headline_metric
from harness.results.stats import Interval, median_difference, unpaired_median_difference
from harness.results.vocabulary import Vocabulary

MINUS = "\u2212"  # printed deltas use the minus sign, as the figures do


def variant_label(variant: str, mirror: str, mirrors: set[str]) -> str:
    """'after' or 'after (mirror=absent)' when a run mixes mirror settings."""
    return variant if len(mirrors) <= 1 else f"{variant} (mirror={mirror})"


def cell_name(cell: tuple, mirrors: set[str]) -> str:
    """`nonspec bs=8 after`, `sync_cost item k=1 fwd=0us bs=64`, `dp_attention gloo/... bs=16
    rank=1 after`: a cell of CELL_KEYS, the keys it fills."""
    scenario, case, variant, mirror, batch_size, rank = cell
    parts = [
        scenario,
        case,
        f"bs={batch_size}" if batch_size else "",
        f"rank={rank}" if rank else "",
        variant_label(variant, mirror, mirrors) if variant else "",
    ]
    return " ".join(str(p) for p in parts if p)


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


# positions in a cell tuple (CELL_KEYS)
_SCENARIO, _CASE, _VARIANT, _MIRROR, _BATCH, _RANK = range(6)


def _reference(
    cells: list[tuple], rates: dict[tuple, CellRates], vocabulary: Vocabulary
) -> tuple | None:
    """The reference cell to compare against: at the first mirror setting of the vocabulary
    (the one upstream runs) if it ran, else the first that ran."""
    ran = [c for c in cells if rates[c].per_kind or not rates[c].times.empty]
    ref = [c for c in ran if c[_VARIANT] == vocabulary.reference]
    usual = [c for c in ref if vocabulary.mirrors and c[_MIRROR] == vocabulary.mirrors[0]]
    return (usual or ref or [None])[0]


def against_reference(
    counts: pd.DataFrame, steps: pd.DataFrame, vocabulary: Vocabulary
) -> list[str]:
    """Per scenario (and case) and batch size, each cell against the vocabulary's reference
    variant (one line each); empty when the run has no cell of it."""
    reference = vocabulary.reference
    if reference is None or reference not in set(counts["variant"]) | set(steps["variant"]):
        return []
    metric = headline_metric(steps)
    rates = cell_rates(counts, steps, metric)
    mirrors = {c[_MIRROR] for c in rates}
    groups: dict[tuple, dict[tuple, list[tuple]]] = {}
    for c in rates:  # (scenario, case) -> (batch size, rank) -> cells, in the runner's order
        where = (c[_SCENARIO], c[_CASE])
        groups.setdefault(where, {}).setdefault((c[_BATCH], c[_RANK]), []).append(c)
    lines = []
    for (scenario, case), by_size in groups.items():
        name = f"{scenario} {case}" if case else scenario
        lines.append(f"scenario {name} (Δ = cell − {reference}; {metric} time per step):")
        for (bs, rank), group in sorted(by_size.items()):
            where = f"  bs={bs}" + (f" rank={rank}" if rank else "")
            lines.extend(_group_lines(where, group, rates, mirrors, vocabulary))
    return lines


def _group_lines(
    where: str, group: list[tuple], rates: dict, mirrors: set[str], vocabulary: Vocabulary
) -> list[str]:
    ref = _reference(group, rates, vocabulary)
    if ref is None:
        return [f"{where}: no `{vocabulary.reference}` cell ran, nothing to compare with"]
    ref_name = variant_label(ref[_VARIANT], ref[_MIRROR], mirrors)
    lines = []
    for c in group:
        if c == ref:
            continue
        head = f"{where} {variant_label(c[_VARIANT], c[_MIRROR], mirrors)} vs {ref_name}"
        if not rates[c].per_kind and rates[c].times.empty:
            lines.append(f"{head}: the cell did not run (see failed cells)")
        else:
            lines.append(delta_line(head, rates[ref], rates[c]))
    return lines
