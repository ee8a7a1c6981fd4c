"""What `bench` prints for a run of the real programs: per program, its syncs per measured step
(each a call of its step) by kind, and the step's time."""

from __future__ import annotations

import pandas as pd

from harness.results.load import RunData
from harness.results.rates import measured, measured_steps
from harness.results.samples import dispersion, headline_metric, step_times
from harness.results.summary import failed_section


def per_program(run: RunData) -> pd.DataFrame:
    """One row per program: measured steps, syncs per step of each kind and in all."""
    steps = measured_steps(run.counts).groupby("case")["step"].nunique().rename("steps")
    syncs = measured(run.syncs, run.counts)
    by_kind = syncs.groupby(["case", "kind"]).size().unstack(fill_value=0)
    table = pd.DataFrame(steps).join(by_kind, how="left").fillna(0)
    kinds = list(by_kind.columns)
    for kind in kinds:
        table[kind] = table[kind] / table["steps"]
    table["syncs per step"] = table[kinds].sum(axis=1) if kinds else 0.0
    return table.rename_axis("program")


def programs_summary(run: RunData) -> list[str]:
    lines = []
    if not run.counts.empty:
        table = per_program(run)
        lines += [
            "Syncs per measured step (one call of the program's step), by kind:",
            table.to_string(float_format=lambda v: f"{v:.2f}"),
        ]
    steps = step_times(run.latency)
    if not steps.empty:
        metric = headline_metric(steps)
        d = dispersion(steps)
        d = d[d["metric"] == metric]
        note = " — emulated device: host times only" if run.is_emulated else ""
        lines.append(f"\n{metric} time per step, µs{note}; p50 with its 95% bootstrap interval:")
        for r in d.itertuples():
            ci = f"{r.p50:.1f} [{r.p50_lo:.1f}, {r.p50_hi:.1f}]"
            lines.append(f"  {r.case:<28} n={r.n:<4} p50 {ci}, p90 {r.p90:.1f}")
    return [*lines, *failed_section(run)]
