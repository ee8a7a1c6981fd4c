"""Syncs per step, read right: per measured step of each kind (decode steps, prefill steps).

A measured step is one with a forward pass on path graph or eager; all its rows count, also
those outside any forward pass, never warm-up or capture rows (rows of the real set-up,
step -1, are never a measured step).

A step's kind comes from its outermost region: the world tags the whole step with the
scheduler batch's forward mode (DECODE, or EXTEND for a prefill step; EAGLE's draft, verify
and draft-extend passes run inside a DECODE step), so DECODE makes a decode step and EXTEND a
prefill step. A rate "per decode step" is the syncs of the decode steps divided by their
number: what one such step makes, never diluted by steps of the other kind.
"""

from __future__ import annotations

import pandas as pd

from harness.results.tables import CELL_KEYS, MEASURED_PATHS

CELL = list(CELL_KEYS)  # a list: pandas takes a tuple for one key
STEP_KINDS = {"DECODE": "decode", "EXTEND": "prefill"}
KIND_ORDER = ("decode", "prefill")
# Rows never per step. "setup" is left out on purpose: the runner's first format labelled a
# measured step's rows outside any forward pass "setup".
NOT_MEASURED = ("warmup", "capture")


def step_kind(forward_mode: str) -> str:
    """decode / prefill for a step's forward mode; another mode reads as its own name."""
    return STEP_KINDS.get(forward_mode, str(forward_mode).lower() or "untagged")


def measured_steps(counts: pd.DataFrame) -> pd.DataFrame:
    """(cell, step) of every measured step."""
    m = counts[counts["path"].isin(MEASURED_PATHS)]
    return m[[*CELL, "step"]].drop_duplicates()


def measured(df: pd.DataFrame, counts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows of measured steps only (steps from counts, default df itself)."""
    steps = measured_steps(df if counts is None else counts)
    rows = df[~df["path"].isin(NOT_MEASURED)]
    return rows.merge(steps, on=[*CELL, "step"], how="inner")


def step_kinds(counts: pd.DataFrame) -> pd.DataFrame:
    """(cell, step, step_kind) of every measured step, from its outermost region's mode (a
    step that entered no region reads "untagged": its syncs still count)."""
    m = measured(counts)
    region = m["region"].astype(str)
    roots = m[~region.str.contains("/") & (region != "")]
    modes = roots.drop_duplicates([*CELL, "step"])[[*CELL, "step", "forward_mode"]]
    steps = measured_steps(counts).merge(modes, on=[*CELL, "step"], how="left")
    kinds = [step_kind(x) if isinstance(x, str) else step_kind("") for x in steps["forward_mode"]]
    return steps.drop(columns="forward_mode").assign(step_kind=kinds).reset_index(drop=True)


def steps_per_kind(counts: pd.DataFrame) -> pd.DataFrame:
    """Measured steps of each kind per cell: CELL_KEYS, step_kind, steps."""
    k = step_kinds(counts)
    if k.empty:
        return pd.DataFrame(columns=[*CELL, "step_kind", "steps"])
    return k.groupby([*CELL, "step_kind"]).size().rename("steps").reset_index()


def syncs_per_kind_step(counts: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Syncs per step of each kind, grouped by `by` (cell keys and row keys, e.g. region).

    Columns: *by, step_kind, syncs, steps, per_step — `steps` counts the steps of that kind in
    the cells of the group (pooled over the group's cells), so rates of one (cell, kind) add
    up over regions to that kind's total."""
    cols = [*by, "step_kind", "syncs", "steps", "per_step"]
    m = measured(counts)
    if m.empty:
        return pd.DataFrame(columns=cols)
    m = m.merge(step_kinds(counts), on=[*CELL, "step"], how="inner")
    cell_by = [k for k in CELL if k in by]
    steps = steps_per_kind(counts).groupby([*cell_by, "step_kind"])["steps"].sum().reset_index()
    total = m.groupby([*by, "step_kind"])["syncs"].sum().reset_index()
    out = total.merge(steps, on=[*cell_by, "step_kind"], how="left")
    out["per_step"] = out["syncs"] / out["steps"]
    return out[cols]


def total_per_kind_step(counts: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Syncs per step of each kind, all regions together (default: per cell)."""
    return syncs_per_kind_step(counts, CELL if by is None else by)
