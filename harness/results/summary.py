"""The terminal summary of a run: syncs per measured step by region, latency percentiles."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.results.read import read_table
from harness.results.tables import CELL_KEYS, MEASURED_PATHS, UNMEASURED_PATHS

PERCENTILES = (50, 90, 99)


def syncs_per_step(counts: pd.DataFrame) -> pd.DataFrame:
    """Mean syncs per measured step for each (cell, forward_mode, region); path graph|eager."""
    cols = [*CELL_KEYS, "forward_mode", "region", "syncs_per_step"]
    m = counts[counts["path"].isin(MEASURED_PATHS)]
    if m.empty:
        return pd.DataFrame(columns=cols)
    steps = m.groupby(list(CELL_KEYS))["step"].nunique().rename("n_steps")
    tot = m.groupby([*CELL_KEYS, "forward_mode", "region"], as_index=False)["syncs"].sum()
    tot = tot.join(steps, on=list(CELL_KEYS))
    tot["syncs_per_step"] = tot["syncs"] / tot["n_steps"]
    return tot[cols]


def sync_table(counts: pd.DataFrame) -> str:
    """Rows (scenario, variant, mirror, forward_mode, region), one column per batch size; only
    regions with syncs, plus each variant's total."""
    per = syncs_per_step(counts)
    if per.empty:
        return "(no measured steps)"
    total = per.groupby(list(CELL_KEYS), as_index=False)["syncs_per_step"].sum()
    total["forward_mode"], total["region"] = "", "TOTAL"
    nz = per[per["syncs_per_step"] > 0]
    both = pd.concat([nz, total], ignore_index=True)
    both["forward_mode"] = both["forward_mode"].replace("", "-")
    table = both.pivot_table(
        index=["scenario", "variant", "mirror", "forward_mode", "region"],
        columns="batch_size",
        values="syncs_per_step",
        aggfunc="sum",
    )
    table.columns = [f"bs={int(c)}" for c in table.columns]
    return table.to_string(float_format=lambda v: f"{v:.2f}", na_rep="")


def latency_percentiles(latency: pd.DataFrame, region: str = "iteration") -> pd.DataFrame:
    cols = [*CELL_KEYS, "device", "metric", "n", *(f"p{p}" for p in PERCENTILES), "unit"]
    lat = latency[(latency["region"] == region) & ~latency["path"].isin(UNMEASURED_PATHS)]
    if lat.empty:
        return pd.DataFrame(columns=cols)
    g = lat.groupby([*CELL_KEYS, "device", "metric", "unit"])["value"]
    out = g.count().rename("n").to_frame()
    for p in PERCENTILES:
        out[f"p{p}"] = g.quantile(p / 100)
    return out.reset_index()[cols]


def latency_table(latency: pd.DataFrame) -> str:
    pct = latency_percentiles(latency)
    if pct.empty:
        return "(no time pass)"
    pct = pct.set_index([*CELL_KEYS, "device", "metric", "unit"])
    return pct.to_string(float_format=lambda v: f"{v:.1f}")


def failed_cells(outcomes: pd.DataFrame) -> pd.DataFrame:
    bad = outcomes[outcomes["status"] != "ok"]
    return bad[[*CELL_KEYS, "pass", "exception", "message", "location"]]


def format_summary(folder: Path) -> str:
    counts = read_table(folder, "counts")
    latency = read_table(folder, "latency")
    outcomes = read_table(folder, "outcomes")
    findings = read_table(folder, "findings")
    parts = ["Syncs per measured step (graph and eager steps; regions with syncs, and totals):"]
    parts.append(sync_table(counts))
    dev = sorted(set(latency["device"])) if not latency.empty else []
    note = " — emulated device: host times only" if dev == ["emu"] else ""
    parts.append(f"\nLatency per scheduler iteration, µs{note}:")
    parts.append(latency_table(latency))
    bad = failed_cells(outcomes)
    if not bad.empty:
        parts.append("\nFailed cells (recorded in outcomes.csv; the run went on):")
        parts.append(bad.to_string(index=False))
    if not findings.empty:
        n = findings.groupby(["variant", "mirror", "kind"]).size().rename("findings")
        parts.append("\nFindings (findings.csv):")
        parts.append(n.to_string())
    return "\n".join(parts)
