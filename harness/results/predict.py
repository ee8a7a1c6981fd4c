"""A Δ the costs predict: for each variant against the reference, the change of what its sync
sites cost the step (the sites it removes, adds or changes), next to the measured Δ, and
whether the prediction lies inside the measured interval; where it does not, what is left
unexplained and the host time that moved most.

A call's cost is the device idle its wait put on the step, min(host wait, idle after it)
(harness.results.idle), from the traced steps; per cell and process, the costs of all its calls
summed per step; the prediction is the per-process difference of those sums, paired by process
like the measured Δ. On the emulated device there is no device time: the costs are the host
waits themselves (of the untraced steps), and the lines say so.
"""

from __future__ import annotations

import pandas as pd

from harness.results.deltas import (
    cell_rates,
    digits_for,
    paired_delta,
    signed,
    variant_label,
)
from harness.results.load import RunData
from harness.results.replicas import mean_interval, paired_process_difference
from harness.results.samples import CELL, STEP_REGION, UNMEASURED_TIME, headline_metric, step_times
from harness.results.stats import Interval
from harness.results.vocabulary import Vocabulary
from harness.results.waits import SITE_KEYS, call_parts, steps_per_process

_SCENARIO, _CASE, _VARIANT, _MIRROR, _BATCH, _RANK, _ARM = range(7)
TOP_REGIONS = 3


def _cost_per_step(waits: pd.DataFrame, latency: pd.DataFrame, value: str) -> pd.DataFrame:
    """Per (cell, process) and per (cell, process, site): `value` summed per step."""
    steps = steps_per_process(latency)
    if steps.empty:
        return pd.DataFrame(columns=[*CELL, "process", *SITE_KEYS, "per_step"])
    calls = call_parts(waits)
    per = calls.groupby([*CELL, "process", *SITE_KEYS])[value].sum().rename("total")
    per = per.reset_index().join(steps, on=[*CELL, "process"], how="inner").reset_index(drop=True)
    per["per_step"] = per["total"] / per["steps"]
    return per


def _by_process(per: pd.DataFrame, cell: tuple, steps: pd.Series) -> pd.Series:
    """A cell's summed cost per step in each process that ran it (0 where it made no call)."""
    ran = [p for (*c, p) in steps.index if tuple(c) == cell]
    mine = per[(per[CELL] == pd.Series(cell, index=CELL)).all(axis=1)]
    total = mine.groupby("process")["per_step"].sum()
    return total.reindex(ran, fill_value=0.0).sort_index()


def _site_deltas(per: pd.DataFrame, ref: tuple, cell: tuple) -> list[str]:
    """`site −7.9 (removed)`: the sites whose mean cost per step moved by 0.05 µs or more."""

    def mean_of(c: tuple) -> pd.Series:
        mine = per[(per[CELL] == pd.Series(c, index=CELL)).all(axis=1)]
        return mine.groupby("site")["per_step"].sum() / max(1, mine["process"].nunique())

    a, b = mean_of(ref), mean_of(cell)
    out = []
    for site in sorted(set(a.index) | set(b.index)):
        d = float(b.get(site, 0.0) - a.get(site, 0.0))
        if abs(d) >= 0.05:
            how = "removed" if site not in b.index else "added" if site not in a.index else ""
            out.append((abs(d), f"{site} {signed(d, 1)}" + (f" ({how})" if how else "")))
    return [text for _d, text in sorted(out, reverse=True)]


def _leaf_regions(regions: set[str]) -> set[str]:
    return {r for r in regions if not any(o.startswith(f"{r}/") for o in regions)}


def region_deltas(latency: pd.DataFrame, ref: tuple, cell: tuple) -> list[tuple[str, Interval]]:
    """Host µs per step of each innermost region, cell − reference, paired by process; the
    ones that moved most first."""
    lat = latency[~latency["path"].isin(UNMEASURED_TIME) & (latency["step"] >= 0)]
    lat = lat[(lat["metric"] == "host") & (lat["region"] != STEP_REGION)]
    steps = steps_per_process(latency)
    out = []
    for region in sorted(_leaf_regions(set(lat["region"].astype(str)))):
        per = lat[lat["region"] == region].groupby([*CELL, "process"])["value_us"].sum()
        per = (per / steps).dropna()
        sides = []
        for c in (ref, cell):
            ran = [p for (*k, p) in steps.index if tuple(k) == c]
            got = per[[i for i in per.index if tuple(i[:-1]) == c]]
            got.index = [i[-1] for i in got.index]
            sides.append(got.reindex(ran, fill_value=0.0))
        ci, _p = paired_process_difference(*sides)
        out.append((region, ci))
    return sorted(out, key=lambda rc: -abs(rc[1].estimate))


def _interval(ci: Interval, digits: int) -> str:
    text = f"{signed(ci.estimate, digits)} µs"
    if ci.low == ci.low:
        text += f" [{signed(ci.low, digits)}, {signed(ci.high, digits)}]"
    return text


def prediction_section(run: RunData, vocabulary: Vocabulary) -> list[str]:
    """Per scenario (and case) and batch size, each variant's predicted Δ beside its measured
    one; empty without a time pass or a reference cell."""
    steps = step_times(run.latency)
    if steps.empty or vocabulary.reference is None:
        return []
    traced = not run.traced_waits.empty
    if run.is_emulated:
        waits, latency, value = run.waits, run.latency, "wait"
        how = (
            "emulated device: device time is not measured, so each call costs its host wait "
            "(the op's own host time)"
        )
    elif traced:
        waits, latency, value = run.traced_waits, run.traced_latency, "cost"
        how = "each call costs min(host wait, device idle after it), from the traced steps"
    else:
        why = run.meta.get("device_trace") or "not measured (no traced steps in this run)"
        return [f"\nΔ the sync costs predict: none, device idle {why}"]
    per = _cost_per_step(waits, latency, value)
    cost_steps = steps_per_process(latency)
    metric = headline_metric(steps)
    rates = cell_rates(run.counts.iloc[0:0], steps, metric)
    mirrors = {c[_MIRROR] for c in rates}
    lines = [
        f"\nΔ against {vocabulary.reference} that the sync costs predict, beside the measured "
        f"Δ ({metric}; {how}):"
    ]
    for c in rates:
        if c[_VARIANT] == vocabulary.reference or c[_ARM] != "":
            continue
        ref = next(
            (
                r
                for r in rates
                if r[_VARIANT] == vocabulary.reference
                and r[_ARM] == ""
                and (r[:_VARIANT], r[_BATCH:_ARM]) == (c[:_VARIANT], c[_BATCH:_ARM])
            ),
            None,
        )
        if ref is None or rates[c].times.empty or rates[ref].times.empty:
            continue
        lines.append(_line(run, per, cost_steps, rates, ref, c, mirrors, vocabulary))
    return lines if len(lines) > 1 else []


def _line(run, per, cost_steps, rates, ref, c, mirrors, vocabulary) -> str:
    a, b = _by_process(per, ref, cost_steps), _by_process(per, c, cost_steps)
    both = pd.concat({"a": a, "b": b}, axis=1, join="inner")
    predicted, _p = mean_interval((both["b"] - both["a"]).to_numpy())
    measured = paired_delta(rates[ref], rates[c])
    digits = digits_for(measured.estimate, measured.low, measured.high)
    where = f"  bs={c[_BATCH]}" + (f" rank={c[_RANK]}" if c[_RANK] else "")
    if c[_CASE]:
        where += f" {c[_CASE]}"
    head = f"{where} {variant_label(c[_VARIANT], c[_MIRROR], mirrors)}"
    sites = _site_deltas(per, ref, c)
    text = f"{head}: predicted {_interval(predicted, digits_for(predicted.estimate))}"
    if sites:
        text += f" ({'; '.join(sites)})"
    text += f"; measured {_interval(measured, digits)}"
    if measured.low != measured.low:
        return text + ": no measured interval to hold it against"
    if measured.low <= predicted.estimate <= measured.high:
        return text + ": the prediction lies inside the measured interval"
    left = measured.estimate - predicted.estimate
    moved = region_deltas(run.latency, ref, c)[:TOP_REGIONS]
    regions = ", ".join(f"{r} {_interval(ci, digits_for(ci.estimate))}" for r, ci in moved)
    text += (
        f": the prediction lies outside the measured interval; unexplained "
        f"{signed(left, digits)} µs"
    )
    return text + (f"; host time per step that moved most: {regions}" if regions else "")
