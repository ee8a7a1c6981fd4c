"""A cell against a reference cell: Δ syncs per decode step and per prefill step (exact: the
count pass is deterministic), and Δ p50 step time with its 95% interval, at the level where the
variance lives: with several worker processes (`--repeats N`) a t-interval over the
per-process differences of medians (harness.results.replicas), else a bootstrap over the steps
of the one process (harness.results.stats); paired either way (each process ran every cell).

Within one run the reference is the world's reference variant (its vocabulary). Its A/A arm (a
second, independently built reference cell) gives the run's measured noise floor: the farthest
bound of the A/A Δ's interval. A Δ within the noise floor is never reported as a difference,
even when its interval excludes 0.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pandas as pd

from harness.results.rates import CELL, KIND_ORDER, steps_per_kind, total_per_kind_step
from harness.results.replicas import MIN_PROCESSES, paired_process_difference
from harness.results.samples import cell_series, headline_metric
from harness.results.stats import Interval, median_difference
from harness.results.tables import AA_ARM
from harness.results.vocabulary import Vocabulary

MINUS = "\u2212"  # printed deltas use the minus sign, as the figures do


def variant_label(variant: str, mirror: str, mirrors: set[str]) -> str:
    """'after' or 'after (mirror=absent)' when a run mixes mirror settings."""
    return variant if len(mirrors) <= 1 else f"{variant} (mirror={mirror})"


def cell_name(cell: tuple, mirrors: set[str]) -> str:
    """`nonspec bs=8 after`, `sync_cost item k=1 fwd=0us bs=64`, `dp_attention gloo/... bs=16
    rank=1 after`: a cell of CELL_KEYS, the keys it fills (`before A/A`: the A/A arm)."""
    scenario, case, variant, mirror, batch_size, rank, arm = cell
    parts = [
        scenario,
        case,
        f"bs={batch_size}" if batch_size else "",
        f"rank={rank}" if rank else "",
        variant_label(variant, mirror, mirrors) if variant else "",
        "A/A" if arm == AA_ARM else arm,
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
    times: pd.Series  # headline metric per (process, step), µs (empty without a time pass)

    @functools.cached_property
    def medians(self) -> pd.Series:
        """The median of each process, indexed by process (computed once per cell)."""
        if self.times.empty:
            return pd.Series(dtype=float)
        return self.times.groupby(level="process").median()


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


def sync_deltas(ref: CellRates, cell: CellRates, names: tuple[str, str]) -> str:
    """Δ syncs per step of each kind; `names` say which side lacks a count pass, if one does."""
    if not ref.per_kind and not cell.per_kind:
        return "no count pass"
    for side, rates in zip(names, (ref, cell)):
        if not rates.per_kind:
            return f"syncs per step n/a ({side} has no count pass)"
    return ", ".join(_sync_delta(ref, cell, k) for k in KIND_ORDER)


def digits_for(*values: float) -> int:
    """Whole µs from 100 µs on, else one decimal."""
    return 0 if max((abs(v) for v in values if v == v), default=0.0) >= 100 else 1


def format_time_delta(ci: Interval, floor: float | None = None, differs: bool | None = None) -> str:
    """`Δ p50 = −412 µs [95% CI −530, −290]`, with the verdict when it is no difference: the
    interval holds 0, or the Δ is within `floor` (the run's noise floor, printed beside it).
    `differs`: a verdict made elsewhere (corrected for several cells compared)."""
    if ci.n == 0:
        return "Δ p50: no common timed steps"
    digits = digits_for(ci.low, ci.high, ci.estimate, floor if floor is not None else 0.0)
    if ci.low != ci.low:  # a single paired step: no interval
        return f"Δ p50 = {signed(ci.estimate, digits)} µs ({ci.n} step: no interval)"
    text = (
        f"Δ p50 = {signed(ci.estimate, digits)} µs "
        f"[95% CI {signed(ci.low, digits)}, {signed(ci.high, digits)}]"
    )
    if floor is not None:
        text += f" (noise floor ±{floor:.{digits}f})"
    within = floor is not None and abs(ci.estimate) <= floor
    if differs is None:
        differs = ci.excludes_zero and not within
    if differs:
        return text
    said = "within the noise floor" if ci.excludes_zero and within else "no measurable difference"
    return f"{text}: {said}"


def paired_delta(ref: CellRates, cell: CellRates) -> Interval:
    """Δ p50 of two cells of one run, paired: over the per-process differences of medians
    with several processes, else over the steps of the one process."""
    if min(ref.medians.size, cell.medians.size) >= MIN_PROCESSES:
        return paired_process_difference(ref.medians, cell.medians)[0]
    return median_difference(ref.times, cell.times)


def noise_floor(ci: Interval) -> float:
    """How far two identical cells' Δ reached: the farthest bound of the A/A interval (its
    estimate where there is no interval)."""
    if ci.low != ci.low:
        return abs(ci.estimate)
    return max(abs(ci.low), abs(ci.high))


def delta_line(head: str, ref: CellRates, cell: CellRates, floor: float | None = None) -> str:
    """One line: `{head}: −1.00 syncs per decode step, +0.00 per prefill step; Δ p50 = …`,
    paired (harness.results.deltas.paired_delta), beside the noise floor when there is one."""
    syncs = sync_deltas(ref, cell, ("the reference", "this cell"))
    if ref.times.empty or cell.times.empty:
        return f"{head}: {syncs}; no time pass"
    return f"{head}: {syncs}; {format_time_delta(paired_delta(ref, cell), floor)}"


# positions in a cell tuple (CELL_KEYS)
_SCENARIO, _CASE, _VARIANT, _MIRROR, _BATCH, _RANK, _ARM = range(7)


def _reference(
    cells: list[tuple], rates: dict[tuple, CellRates], vocabulary: Vocabulary
) -> tuple | None:
    """The reference cell to compare against: at the first mirror setting of the vocabulary
    (the one upstream runs) if it ran, else the first that ran."""
    ran = [c for c in cells if rates[c].per_kind or not rates[c].times.empty]
    ref = [c for c in ran if c[_VARIANT] == vocabulary.reference and c[_ARM] != AA_ARM]
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
    how = "between processes" if steps["process"].nunique() >= MIN_PROCESSES else "over steps"
    groups: dict[tuple, dict[tuple, list[tuple]]] = {}
    for c in rates:  # (scenario, case) -> (batch size, rank) -> cells, in the runner's order
        where = (c[_SCENARIO], c[_CASE])
        groups.setdefault(where, {}).setdefault((c[_BATCH], c[_RANK]), []).append(c)
    lines = []
    for (scenario, case), by_size in groups.items():
        name = f"{scenario} {case}" if case else scenario
        lines.append(
            f"scenario {name} (Δ = cell − {reference}; {metric} time per step; 95% CI {how}, "
            "paired; A/A: the reference built twice):"
        )
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
    twin = (*ref[:_ARM], AA_ARM)
    floor = None
    lines = []
    if twin in rates and not rates[twin].times.empty:
        aa = paired_delta(rates[ref], rates[twin])
        floor = noise_floor(aa)
        lines.append(
            f"{where} A/A ({ref_name} built twice): {format_time_delta(aa)}; "
            f"noise floor ±{floor:.{digits_for(floor)}f} µs"
        )
    for c in group:
        if c in (ref, twin):
            continue
        head = f"{where} {variant_label(c[_VARIANT], c[_MIRROR], mirrors)}"
        head += (" A/A" if c[_ARM] == AA_ARM else "") + f" vs {ref_name}"
        if not rates[c].per_kind and rates[c].times.empty:
            lines.append(f"{head}: the cell did not run (see failed cells)")
        else:
            lines.append(delta_line(head, rates[ref], rates[c], floor))
    return lines
