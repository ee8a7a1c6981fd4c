"""Two run folders side by side: each cell of B against the same cell of A (Δ syncs per decode
and per prefill step, Δ p50 step time with its interval), and the rows whose syncs per step
differ. Cells match by (scenario, variant, mirror, batch size, rank) and rows further by (step
kind, forward mode, path, region); what one run lacks is shown as missing, never as 0.

Step k of two cells is the same work only when the runs had the same configuration (meta.json's
`config`: the scenario after its overrides, seed included); otherwise compare says which keys
differ and does not pair the steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import InputError, shown
from harness.results.deltas import cell_name, cell_rates, delta_line, signed
from harness.results.load import RunData, load_run
from harness.results.rates import CELL, syncs_per_kind_step
from harness.results.samples import headline_metric, step_times

ROW_KEYS = ["step_kind", "forward_mode", "path", "region"]
MISSING = "missing"


def _scenarios(run: RunData) -> list[str]:
    return sorted(set(run.counts["scenario"]) | set(run.latency["scenario"]))


def check_same_scenario(a: RunData, b: RunData, other_scenario: bool) -> None:
    """Runs of different scenarios share no cell: refused unless asked for."""
    sa, sb = _scenarios(a), _scenarios(b)
    if sa != sb and not other_scenario:
        raise InputError(
            f"runs of different scenarios (A: {', '.join(sa) or 'none'}; B: "
            f"{', '.join(sb) or 'none'}); pass --other-scenario to match their cells anyway",
            file=str(b.path),
            key="scenario",
        )


def _unscoped(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of another scenario, matched as if of one (--other-scenario)."""
    return df.assign(scenario="*") if len(df) else df


def sync_diff(a: pd.DataFrame, b: pd.DataFrame, show_all: bool = False) -> str:
    """Syncs per step of each kind, A and B, per cell and row; rows that differ (all rows with
    show_all). A row one run lacks reads `missing`."""
    keys = [*CELL, *ROW_KEYS]
    pa = syncs_per_kind_step(a, [*CELL, *ROW_KEYS[1:]]).set_index(keys)["per_step"]
    pb = syncs_per_kind_step(b, [*CELL, *ROW_KEYS[1:]]).set_index(keys)["per_step"]
    df = pd.concat([pa.rename("A"), pb.rename("B")], axis=1)
    if df.empty:
        return "(no measured steps in either run)"
    if not show_all:
        df = df[(df["A"] != df["B"]) | df["A"].isna() | df["B"].isna()]
    if df.empty:
        return "(no difference)"
    out = pd.DataFrame(index=df.index)
    for side in ("A", "B"):
        out[side] = [MISSING if v != v else f"{v:.2f}" for v in df[side]]
    out["B − A"] = [
        MISSING if (x != x or y != y) else signed(y - x, 2) for x, y in zip(df["A"], df["B"])
    ]
    return out.sort_index().to_string()


def _flat(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as dotted keys -> values."""
    if not isinstance(config, dict):
        return {prefix.rstrip("."): config}
    out: dict[str, Any] = {}
    for key, value in config.items():
        out.update(_flat(value, f"{prefix}{key}."))
    return out


def config_differences(a: dict, b: dict) -> list[str]:
    """`key: A x, B y` for every configuration key whose value differs between two runs."""
    fa, fb = _flat(a.get("config") or {}), _flat(b.get("config") or {})
    absent = "(absent)"
    return [
        f"{k}: A {shown(fa.get(k, absent))}, B {shown(fb.get(k, absent))}"
        for k in sorted(set(fa) | set(fb))
        if fa.get(k, absent) != fb.get(k, absent)
    ]


def cell_lines(a: RunData, b: RunData, paired: bool) -> list[str]:
    """One line per cell of either run: B against A."""
    steps_a, steps_b = step_times(a.latency), step_times(b.latency)
    metric = headline_metric(pd.concat([steps_a, steps_b]))
    ra = cell_rates(a.counts, steps_a, metric)
    rb = cell_rates(b.counts, steps_b, metric)
    mirrors = {c[CELL.index("mirror")] for c in (*ra, *rb)}
    pairing = "paired by step" if paired else "not paired: the configurations differ"
    lines = [f"(Δ = B − A; {metric} time per step; 95% bootstrap CI, {pairing})"]
    for cell in dict.fromkeys([*ra, *rb]):
        head = cell_name(cell, mirrors)
        if cell not in ra or cell not in rb:
            lines.append(f"{head}: {MISSING} in {'A' if cell not in ra else 'B'}")
        else:
            lines.append(delta_line(head, ra[cell], rb[cell], paired))
    return lines


def compare_runs(a: Path, b: Path, show_all: bool = False, other_scenario: bool = False) -> str:
    run_a, run_b = load_run(a), load_run(b)
    check_same_scenario(run_a, run_b, other_scenario)
    if other_scenario:
        for run in (run_a, run_b):
            for name in ("counts", "latency"):
                setattr(run, name, _unscoped(getattr(run, name)))
    parts = [f"A = {a}\nB = {b}"]
    if run_a.meta.get("device_kind") != run_b.meta.get("device_kind"):
        parts.append(
            f"note: devices differ (A: {run_a.device}, B: {run_b.device}); times do not compare"
        )
    differ = config_differences(run_a.meta, run_b.meta)
    if differ:
        parts.append(
            "note: the configurations differ, so step k of A and of B are not the same work and "
            "the steps are not paired: " + "; ".join(differ)
        )
    elif run_a.meta.get("scenario_sha256") != run_b.meta.get("scenario_sha256"):
        parts.append("note: the scenario files differ, but not the configurations they gave")
    parts.append(
        "\nEach cell, B against A (runs made at different times: a time difference also holds "
        "what changed on the machine between them; cells of one run are interleaved):"
    )
    parts.extend(cell_lines(run_a, run_b, paired=not differ))
    parts.append("\nSyncs per measured step of each kind (A, B, B − A):")
    parts.append(sync_diff(run_a.counts, run_b.counts, show_all))
    return "\n".join(parts)
