"""The terminal summary of a run: the sections its world registers
(harness.results.vocabulary.ResultsPart), built from the blocks here — syncs per decode and
per prefill step by region, step-time dispersion per cell, each variant against the
reference, failed cells and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.results.deltas import against_reference, cell_name, signed
from harness.results.load import RunData, load_run
from harness.results.rates import CELL, KIND_ORDER, steps_per_kind, syncs_per_kind_step
from harness.results.replicas import MIN_PROCESSES, paired_process_difference
from harness.results.samples import dispersion, headline_metric, processes, step_times
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


def _part(value: float, lo: float, hi: float) -> str:
    if value != value:
        return "n/a"
    text = f"{value:.1f}"
    return text + (f" [{lo:.1f}, {hi:.1f}]" if lo == lo else "")


def waits_section(run: RunData, top: int = 8) -> list[str]:
    """The sync sites of each cell ranked by µs per step the host waited there (time pass);
    with traced steps, the device idle after each site's calls and what they cost the step."""
    costs = site_costs(run.waits, run.latency, run.traced_waits, run.traced_latency)
    if costs.empty:
        return []
    several = int(costs["processes"].max()) > 1
    how = (
        "95% CI between processes" if several else "one process: no interval, --repeats N gives one"
    )
    if run.is_emulated:
        how += "; emulated device: the op's own host time, no device to wait for"
    traced = costs["idle_per_step"].notna().any()
    what = "the host waited in it"
    if traced:
        what += (
            ", the device idle after it (until the next sync) and the cost to the step: per "
            "call min(wait, idle after), from the traced steps"
        )
    elif not run.is_emulated:
        what += f"; device idle {run.meta.get('device_trace') or 'not measured'}"
    lines = [f"\nWhat each sync site costs: µs per measured step {what} ({how}):"]
    index = [k for k in _index(costs) if k != "scenario"] + ["batch_size"]
    for key, g in costs.groupby(index, sort=False):
        named = zip(index, key if isinstance(key, tuple) else (key,))
        lines.append(
            "  " + " ".join(f"bs={v}" if k == "batch_size" else str(v) for k, v in named if v != "")
        )
        for r in g.head(top).itertuples(index=False):
            line = (
                f"    {_part(r.us_per_step, r.us_lo, r.us_hi)} µs per step at {r.site} "
                f"({r.kind}, {r.calls_per_step:.2f} calls per step)"
            )
            if r.idle_per_step == r.idle_per_step:
                line += (
                    f"; idle after {_part(r.idle_per_step, r.idle_lo, r.idle_hi)}, "
                    f"cost {_part(r.cost_per_step, r.cost_lo, r.cost_hi)}"
                )
            lines.append(line)
    return lines


def trace_section(run: RunData) -> list[str]:
    """What the device tracer was, and what it cost the traced steps (paired by process)."""
    status = run.meta.get("device_trace")
    if status is None or run.is_emulated:
        return []
    lines = [f"\nDevice trace: {status}"]
    if run.traced_latency.empty:
        return lines
    steps, traced = step_times(run.latency), step_times(run.traced_latency)
    p50 = traced.groupby("metric")["value_us"].median()
    if {"busy", "span", "device"} <= set(p50.index):  # the tracer's span against the events'
        lines.append(
            f"  traced steps, p50: device busy {p50['busy']:.0f} µs of a span of "
            f"{p50['span']:.0f} µs (CUDA events: device time {p50['device']:.0f} µs)"
        )
    metric = headline_metric(steps)
    lines.append(f"  what tracing cost a step ({metric}, traced − untraced steps of a cell):")
    for cell, g in traced[traced["metric"] == metric].groupby(CELL, sort=False):
        mine = steps[
            (steps["metric"] == metric) & (steps[CELL] == pd.Series(cell, index=CELL)).all(axis=1)
        ]
        a = mine.groupby("process")["value_us"].median()
        b = g.groupby("process")["value_us"].median()
        ci, _p = paired_process_difference(a, b)
        lines.append(f"    {cell_name(cell, set())}: {interval_text(ci)} µs")
    return lines


def repeats_section(run: RunData) -> list[str]:
    """Why `--repeats auto` stopped where it did."""
    rep = run.meta.get("repeats")
    if not rep:
        return []
    why = {
        "reached": "every named Δ reached the target",
        "budget": "the time budget ran out before the target was reached",
        "most": "the most processes ran before the target was reached",
    }[rep["stopped"]]
    widths = ", ".join(f"{k} ±{v:.1f}" for k, v in rep["half_widths_us"].items()) or "none yet"
    return [
        f"\nRepeats: auto, {rep['processes']} processes: {why} (half-width ≤ "
        f"{rep['target_us']:g} µs, budget {rep['budget_s']:g} s); half-widths, µs: {widths}"
    ]


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
