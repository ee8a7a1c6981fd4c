"""The terminal summary of a run, section by section: syncs per decode and per prefill step by
region, step-time dispersion per cell, each variant against `before` with its interval, the
sync-cost experiment's µs per sync, failed cells and findings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from harness.results.load import RunData, load_run
from harness.results.deltas import against_before, signed
from harness.results.rates import CELL, KIND_ORDER, steps_per_kind, syncs_per_kind_step
from harness.results.samples import dispersion, headline_metric, step_times
from harness.results.stats import Interval
from harness.synccost.analysis import count_problems, only_cases, sync_costs, without_cases

TOTAL = "TOTAL"


def _index(df: pd.DataFrame) -> list[str]:
    """Row keys shown: the rank only when the run has more than one."""
    keys = ["scenario", "variant", "mirror"]
    return [*keys, "rank"] if df["rank"].nunique() > 1 else keys


def sync_table(counts: pd.DataFrame) -> str:
    """Syncs per decode step and per prefill step, by batch size: the regions that sync, and
    each cell's total over all its regions (the region rows add up to it)."""
    by = [*CELL, "forward_mode", "region"]
    per = syncs_per_kind_step(counts, by)
    if per.empty:
        return "(no measured steps)"
    total = per.groupby([*CELL, "step_kind"], as_index=False).agg(
        syncs=("syncs", "sum"), steps=("steps", "first")
    )
    total["per_step"] = total["syncs"] / total["steps"]
    total["forward_mode"], total["region"] = "", TOTAL
    hot = per.groupby(["scenario", "variant", "mirror", "forward_mode", "region"])["syncs"]
    keep = hot.transform("sum") > 0
    both = pd.concat([per[keep], total], ignore_index=True)
    both["forward_mode"] = both["forward_mode"].replace("", "-")
    index = [*_index(both), "forward_mode", "region"]
    table = both.pivot_table(
        index=index, columns=["batch_size", "step_kind"], values="per_step", aggfunc="sum"
    )
    kinds = [k for k in KIND_ORDER if k in set(both["step_kind"])]
    kinds += sorted(set(both["step_kind"]) - set(kinds))
    table = table.reindex(
        columns=pd.MultiIndex.from_product([sorted(set(both["batch_size"])), kinds])
    )
    table.columns = pd.MultiIndex.from_tuples(
        [(f"bs={int(b)}", k) for b, k in table.columns], names=["", "step"]
    )
    table = table.dropna(axis=1, how="all")
    return table.to_string(float_format=lambda v: f"{v:.2f}", na_rep="")


def steps_line(counts: pd.DataFrame) -> str:
    """How many measured steps of each kind the rates divide by."""
    s = steps_per_kind(counts)
    if s.empty:
        return ""
    per_cell = s.pivot_table(index=CELL, columns="step_kind", values="steps", fill_value=0)
    shapes = per_cell.drop_duplicates()
    if len(shapes) == 1:
        row = shapes.iloc[0]
        what = ", ".join(f"{int(row[k])} {k}" for k in row.index)
        return f"(measured steps per cell: {what})"
    return "(measured steps per cell)\n" + per_cell.to_string()


def latency_table(steps: pd.DataFrame) -> str:
    """n, rounds, p50 with its 95% interval, p90, p99 and IQR per cell and metric, µs."""
    d = dispersion(steps)
    if d.empty:
        return "(no time pass)"
    index = [*_index(d), "batch_size", "metric"]
    d = d.set_index(index).drop(columns=[c for c in CELL if c not in index])
    d = d.rename(columns={"p50_lo": "p50 95% CI lo", "p50_hi": "hi"})
    return d.to_string(float_format=lambda v: f"{v:.1f}")


def _ci(ci: Interval | None) -> str:
    if ci is None or ci.n == 0:
        return "n/a"
    if ci.low != ci.low:
        return f"{signed(ci.estimate, 1)} (1 step)"
    return f"{signed(ci.estimate, 1)} [{signed(ci.low, 1)}, {signed(ci.high, 1)}]"


def sync_cost_table(steps: pd.DataFrame, metric: str) -> str:
    """One row per forward duration, batch size and kind: µs per sync with its interval."""
    rows = [
        {
            "forward_us": f"{c.forward_us:g}",
            "bs": c.batch_size,
            "kind": c.kind,
            "p50 at k=0": f"{c.medians[0].estimate:.1f}" if 0 in c.medians else "n/a",
            f"µs per sync (slope over k={','.join(map(str, c.ks))})": _ci(c.per_sync),
            "first sync": _ci(c.first),
            "each further sync": _ci(c.further),
        }
        for c in sync_costs(steps, metric)
    ]
    return pd.DataFrame(rows).to_string(index=False) if rows else "(no cell with k > 0)"


def sync_cost_lines(run: RunData) -> list[str]:
    """Whether the ledger saw exactly k syncs per step, and µs per sync per forward duration
    and kind."""
    steps = only_cases(step_times(run.latency))
    counts = only_cases(run.counts)
    if counts.empty and steps.empty:
        return []
    lines = ["What one sync costs (the sync-cost experiment):"]
    if not counts.empty:
        problems = count_problems(run.counts, run.syncs)
        lines.append(
            "count pass: every cell made exactly k syncs per step, of the injected kind"
            if not problems
            else "count pass MISMATCH (the ledger and the injection disagree):"
        )
        lines.extend(f"  {p}" for p in problems)
    if steps.empty:
        return [*lines, "(no time pass: no cost per sync)"]
    metric = headline_metric(steps)
    note = " — emulated device: host time only, no pipeline bubble" if run.is_emulated else ""
    lines.append(f"{metric} time per step, µs{note}; 95% bootstrap CI, paired by step:")
    return [*lines, sync_cost_table(steps, metric)]


def _syncs_section(run: RunData) -> list[str]:
    counts = without_cases(run.counts)
    if counts.empty and not only_cases(run.counts).empty:
        return []
    head = (
        "Syncs per measured step of each kind (decode steps, prefill steps); regions with "
        "syncs, and each cell's total:"
    )
    return [head, sync_table(counts), *filter(None, [steps_line(counts)])]


def _latency_section(run: RunData) -> list[str]:
    steps = without_cases(step_times(run.latency))
    if steps.empty and not only_cases(step_times(run.latency)).empty:
        return []
    note = " — emulated device: host times only" if run.is_emulated else ""
    return [f"\nTime per scheduler iteration, µs{note} (every sample kept):", latency_table(steps)]


def _deltas_section(run: RunData) -> list[str]:
    lines = against_before(without_cases(run.counts), without_cases(step_times(run.latency)))
    return ["\nEach variant against before:", *lines] if lines else []


def _sync_cost_section(run: RunData) -> list[str]:
    lines = sync_cost_lines(run)
    return ["", *lines] if lines else []


def _failed_section(run: RunData) -> list[str]:
    bad = run.outcomes[run.outcomes["status"] != "ok"]
    if bad.empty:
        return []
    cols = [*CELL, "pass", "exception", "message", "location"]
    head = "\nFailed cells (recorded in outcomes.csv; the run went on):"
    return [head, bad[cols].to_string(index=False)]


def _findings_section(run: RunData) -> list[str]:
    if run.findings.empty:
        return []
    n = run.findings.groupby(["variant", "mirror", "kind"]).size().rename("findings")
    return ["\nFindings (findings.csv):", n.to_string()]


SECTIONS: list[Callable[[RunData], list[str]]] = [
    _syncs_section,
    _latency_section,
    _deltas_section,
    _sync_cost_section,
    _failed_section,
    _findings_section,
]


def format_summary(folder: Path) -> str:
    run = load_run(folder)
    return "\n".join(line for section in SECTIONS for line in section(run))
