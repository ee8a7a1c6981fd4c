"""Tidy summaries of a run's DataFrames: what the figures and notebooks plot.

"Per step" always means per measured step, pooled over the batch sizes of a group: total syncs
divided by total steps, so a cell with more steps weighs more. A measured step is one with a
forward pass on path graph or eager; all its rows count, also those outside any forward pass
(the count pass labels them path "setup"), but never warm-up or capture rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report.load import CELL_KEYS, MEASURED_PATHS

VARIANT_ORDER = ("before", "after", "dropped")
STEP_REGION = "iteration"  # the time pass's whole scheduler iteration (host, device, e2e)
# Rows never per step. "setup" is left out on purpose: the runner's first format labelled a
# measured step's rows outside any forward pass "setup"; rows of the real set-up (step -1)
# fall out anyway, since step -1 is never a measured step.
NOT_MEASURED = ("warmup", "capture")
UNMEASURED_TIME = ("warmup", "capture", "setup")  # time pass: warm-up and set-up samples
NO_MODE = "no forward pass"  # rows outside any forward pass (scheduler, mirror)
METRICS = ("host", "device", "e2e")


def measured_steps(counts: pd.DataFrame) -> pd.DataFrame:
    """(cell, step) of every measured step: one with a forward pass on path graph or eager."""
    m = counts[counts["path"].isin(MEASURED_PATHS)]
    return m[[*CELL_KEYS, "step"]].drop_duplicates()


def measured(df: pd.DataFrame, counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows of measured steps only (steps from counts, default df itself)."""
    steps = measured_steps(df if counts is None else counts)
    rows = df[~df["path"].isin(NOT_MEASURED)]
    return rows.merge(steps, on=[*CELL_KEYS, "step"], how="inner")


def variant_label(variant: str, mirror: str, mirrors: set[str]) -> str:
    """'after' or 'after (mirror=absent)' when a run mixes mirror settings."""
    return variant if len(mirrors) <= 1 else f"{variant} (mirror={mirror})"


def order_variants(labels: list[str]) -> list[str]:
    def key(label: str) -> tuple[int, str]:
        base = label.split(" ")[0]
        return (VARIANT_ORDER.index(base) if base in VARIANT_ORDER else 99, label)

    return sorted(set(labels), key=key)


def with_variant_label(df: pd.DataFrame) -> pd.DataFrame:
    mirrors = set(df["mirror"].astype(str)) if len(df) else set()
    out = df.copy()
    out["label"] = [
        variant_label(str(v), str(m), mirrors) for v, m in zip(out["variant"], out["mirror"])
    ]
    return out


def steps_per_cell(counts: pd.DataFrame) -> pd.DataFrame:
    """Number of measured steps of each cell (scenario, variant, mirror, batch size)."""
    m = measured_steps(counts)
    if m.empty:
        return pd.DataFrame(columns=[*CELL_KEYS, "steps"])
    return m.groupby(CELL_KEYS)["step"].nunique().rename("steps").reset_index()


def syncs_per_step(counts: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean syncs per measured step grouped by `by` (which must include scenario and variant)."""
    m = measured(counts)
    cell_by = [k for k in CELL_KEYS if k in by]
    steps = steps_per_cell(counts).groupby(cell_by)["steps"].sum().reset_index()
    if m.empty:
        return pd.DataFrame(columns=[*by, "syncs", "steps", "syncs_per_step"])
    total = m.groupby(by)["syncs"].sum().reset_index()
    out = total.merge(steps, on=cell_by, how="left")
    out["syncs_per_step"] = out["syncs"] / out["steps"]
    return out


def syncs_by_region(counts: pd.DataFrame) -> pd.DataFrame:
    """Syncs per step for each (scenario, variant, mirror, forward_mode, region)."""
    by = ["scenario", "variant", "mirror", "forward_mode", "region"]
    out = with_variant_label(syncs_per_step(counts, by))
    out["forward_mode"] = out["forward_mode"].replace("", NO_MODE)
    return out


def total_syncs_by_batch(counts: pd.DataFrame) -> pd.DataFrame:
    """Syncs per step of each cell, all regions together."""
    return with_variant_label(syncs_per_step(counts, list(CELL_KEYS)))


def eager_batch_sizes(counts: pd.DataFrame) -> dict[str, list[int]]:
    """Per scenario, batch sizes whose decode/verify passes ran eagerly (no graph bucket fit)."""
    m = counts[
        counts["forward_mode"].isin(["DECODE", "TARGET_VERIFY"]) & (counts["path"] == "eager")
    ]
    return {s: sorted(int(b) for b in g.unique()) for s, g in m.groupby("scenario")["batch_size"]}


def blame_table(syncs: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """Syncs per step by source line, one column per variant (the 'sync blame' table)."""
    keys = ["scenario", "location", "function", "kind", "op"]
    m = measured(syncs, counts)
    if m.empty:
        return pd.DataFrame(columns=[*keys, "regions"])
    m = with_variant_label(m)
    steps = with_variant_label(steps_per_cell(counts)).groupby(["scenario", "label"])["steps"].sum()
    n = m.groupby([*keys, "label"]).size().rename("n").reset_index()
    n["per_step"] = n["n"] / [steps.get((s, v), np.nan) for s, v in zip(n["scenario"], n["label"])]
    table = n.pivot_table(index=keys, columns="label", values="per_step", fill_value=0.0)
    # a column for every variant that ran, so "0 syncs here" shows as 0, not as a missing column
    for lab in {lab for _s, lab in steps.index} - set(table.columns):
        table[lab] = 0.0
    table = table[order_variants(list(table.columns))]
    regions = m.groupby(keys)["region"].agg(lambda r: ", ".join(sorted(set(r))))
    modes = m.groupby(keys)["forward_mode"].agg(
        lambda r: ", ".join(sorted({x or NO_MODE for x in r}))
    )
    table = table.join(regions.rename("regions")).join(modes.rename("forward_modes"))
    table["_max"] = table[order_variants([c for c in table.columns if c in set(m["label"])])].max(
        axis=1
    )
    table = table.sort_values(["scenario", "_max"], ascending=[True, False]).drop(columns="_max")
    table.columns.name = None
    return table.reset_index()


def findings_per_cell(findings: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """Findings of each kind per cell, with the cell's measured steps (zero rows included)."""
    steps = steps_per_cell(counts)
    if "pass" in findings and (findings["pass"] == "count").any():
        # both passes report findings; per-step rates need the pass whose steps were counted
        findings = findings[findings["pass"] == "count"]
    # findings of warm-up or set-up steps are not per measured step
    findings = findings.merge(measured_steps(counts), on=[*CELL_KEYS, "step"], how="inner")
    kinds = sorted(set(findings["kind"].astype(str))) or ["stale_mirror"]
    grid = steps.merge(pd.DataFrame({"kind": kinds}), how="cross")
    n = findings.groupby([*CELL_KEYS, "kind"]).size().rename("findings").reset_index()
    out = grid.merge(n, on=[*CELL_KEYS, "kind"], how="left").fillna({"findings": 0})
    out["per_step"] = out["findings"] / out["steps"]
    return with_variant_label(out)


def failed_cells(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Cells that did not run to the end (any pass), with the failure and where it happened."""
    return outcomes[outcomes["status"].astype(str).str.lower() != "ok"]


def step_latency(latency: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, step, metric) with the whole step's time in microseconds."""
    measured_rows = latency[~latency["path"].isin(UNMEASURED_TIME) & (latency["step"] >= 0)]
    whole = measured_rows[measured_rows["region"].astype(str) == STEP_REGION]
    cols = [*CELL_KEYS, "step", "metric", "value_us"]
    return with_variant_label(whole[cols].reset_index(drop=True))


def headline_metric(steps: pd.DataFrame) -> str:
    """e2e when measured (a GPU run), else host time."""
    have = set(steps["metric"].astype(str))
    return next((m for m in ("e2e", "host") if m in have), "host")


def syncs_and_latency(counts: pd.DataFrame, latency: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per cell: syncs per step (count pass) beside median / p10 / p90 step time (time pass)."""
    s = total_syncs_by_batch(counts)
    lat = step_latency(latency)
    lat = lat[lat["metric"] == metric]
    if lat.empty or s.empty:
        return pd.DataFrame(columns=[*CELL_KEYS, "label", "syncs_per_step", "p50_us"])
    q = lat.groupby(CELL_KEYS)["value_us"].quantile([0.1, 0.5, 0.9]).unstack()
    q.columns = ["p10_us", "p50_us", "p90_us"]
    return s.merge(q.reset_index(), on=CELL_KEYS, how="inner")


def cost_per_sync_us(table: pd.DataFrame) -> float:
    """Least-squares µs per extra sync within each (scenario, batch size): the bubble cost.

    Demeaning inside each group compares variants at the same batch size only, so batch-size
    effects on latency do not masquerade as sync cost. NaN when syncs never vary in a group.
    """
    g = table.groupby(["scenario", "batch_size"])
    x = table["syncs_per_step"] - g["syncs_per_step"].transform("mean")
    y = table["p50_us"] - g["p50_us"].transform("mean")
    denom = float((x * x).sum())
    return float((x * y).sum() / denom) if denom > 1e-12 else float("nan")


def latency_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """n, p50, p90, p99 and max per (scenario, variant, batch size, metric), variants in order."""
    keys = ["scenario", "label", "batch_size", "metric"]
    q = steps.groupby(keys)["value_us"]
    out = pd.DataFrame(
        {
            "n": q.size(),
            "p50_us": q.quantile(0.5),
            "p90_us": q.quantile(0.9),
            "p99_us": q.quantile(0.99),
            "max_us": q.max(),
        }
    ).reset_index()
    rank = {lab: i for i, lab in enumerate(order_variants(list(out["label"])))}
    out = out.sort_values(["scenario", "batch_size", "metric"]).sort_values(
        "label", key=lambda s: s.map(rank), kind="stable"
    )
    return out.set_index(keys)
