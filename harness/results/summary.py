"""The terminal summary of a run: the sections its world registers
(harness.results.vocabulary.ResultsPart), built from the blocks here — syncs per decode and
per prefill step by region, step-time dispersion per cell, each variant against the
reference, failed cells and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.results.deltas import against_reference, signed
from harness.results.load import RunData, load_run
from harness.results.rates import CELL, KIND_ORDER, steps_per_kind, syncs_per_kind_step
from harness.results.replicas import MIN_PROCESSES
from harness.results.samples import dispersion, processes, step_times
from harness.results.stats import Interval
from harness.results.vocabulary import Vocabulary, results_part
from harness.results.waits import site_costs

TOTAL = "TOTAL"
ROW_NAMES = ["scenario", "case", "variant", "mirror", "arm"]  # shown when a run fills them


def _index(df: pd.DataFrame) -> list[str]:
    """Row keys shown: those the run fills, and the rank only when it has more than one."""
    keys = [k for k in ROW_NAMES if k == "scenario" or (df[k].astype(str) != "").any()]
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
    hot = per.groupby([*ROW_NAMES, "forward_mode", "region"])["syncs"]
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
        [(f"bs={int(b)}" if b else "", k) for b, k in table.columns], names=["", "step"]
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


def interval_text(ci: Interval | None) -> str:
    """`+12.3 [+10.1, +14.0]`; n/a without samples; `(1 step)` without an interval."""
    if ci is None or ci.n == 0:
        return "n/a"
    if ci.low != ci.low:
        return f"{signed(ci.estimate, 1)} (1 step)"
    return f"{signed(ci.estimate, 1)} [{signed(ci.low, 1)}, {signed(ci.high, 1)}]"


def syncs_section(run: RunData) -> list[str]:
    head = (
        "Syncs per measured step of each kind (decode steps, prefill steps); regions with "
        "syncs, and each cell's total:"
    )
    return [head, sync_table(run.counts), *filter(None, [steps_line(run.counts)])]


def latency_section(run: RunData) -> list[str]:
    note = " — emulated device: host times only" if run.is_emulated else ""
    steps = step_times(run.latency)
    how = (
        "; p50: the mean of the processes' medians, 95% CI between processes"
        if processes(steps) >= MIN_PROCESSES
        else ""
    )
    title = f"\nTime per scheduler iteration, µs{note} (every sample kept{how}):"
    return [title, latency_table(steps)]


def reference_section(run: RunData, vocabulary: Vocabulary) -> list[str]:
    lines = against_reference(run.counts, step_times(run.latency), vocabulary)
    return [f"\nEach variant against {vocabulary.reference}:", *lines] if lines else []


def waits_section(run: RunData, top: int = 8) -> list[str]:
    """The sync sites of each cell ranked by µs per step the host waited there (time pass)."""
    costs = site_costs(run.waits, run.latency)
    if costs.empty:
        return []
    several = int(costs["processes"].max()) > 1
    how = (
        "95% CI between processes" if several else "one process: no interval, --repeats N gives one"
    )
    if run.is_emulated:
        how += "; emulated device: the op's own host time, no device to wait for"
    lines = [f"\nWhat each sync site costs: µs per measured step the host waited in it ({how}):"]
    index = [k for k in _index(costs) if k != "scenario"] + ["batch_size"]
    for key, g in costs.groupby(index, sort=False):
        named = zip(index, key if isinstance(key, tuple) else (key,))
        lines.append(
            "  " + " ".join(f"bs={v}" if k == "batch_size" else str(v) for k, v in named if v != "")
        )
        for r in g.head(top).itertuples(index=False):
            cost = f"{r.us_per_step:.1f}"
            if r.us_lo == r.us_lo:
                cost += f" [{r.us_lo:.1f}, {r.us_hi:.1f}]"
            lines.append(
                f"    {cost} µs per step at {r.site} ({r.kind}, {r.calls_per_step:.2f} calls per step)"
            )
    return lines


def failed_section(run: RunData) -> list[str]:
    bad = run.outcomes[run.outcomes["status"] != "ok"]
    if bad.empty:
        return []
    cells = [k for k in CELL if k in ("scenario", "batch_size", "rank") or (bad[k] != "").any()]
    cols = [*cells, "pass", "exception", "message", "location"]
    head = "\nFailed cells (recorded in outcomes.csv; the run went on):"
    return [head, bad[cols].to_string(index=False)]


def findings_section(run: RunData) -> list[str]:
    if run.findings.empty:
        return []
    n = run.findings.groupby([*_index(run.findings), "kind"]).size().rename("findings")
    return ["\nFindings (findings.csv):", n.to_string()]


def format_summary(folder: Path) -> str:
    """The summary of a run folder, as its world writes it."""
    run = load_run(folder)
    return "\n".join(results_part(run.meta["world"]).summary(run))
