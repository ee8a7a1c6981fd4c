"""Steady-state and occasional syncs, from a run's tables (pandas only: the report runs
without torch).

A sync site is where a sync is made: its region, its source line and its op. In a cell, a
site is steady when it syncs in every measured step of a kind (every decode step, or every
prefill step); it is occasional otherwise (a sweep of the SWA pool, a request that finishes).
Steady sites are read per step of their kind, as everywhere else; occasional sites by their
rate, syncs per 1,000 measured steps of the cell (every kind together)."""

from __future__ import annotations

import pandas as pd

from harness.results.rates import CELL, measured, step_kinds

SITE = ["region", "location", "op"]
# the kinds that are hazards, not syncs (syncledger.events.SyncKind.is_sync; a test holds
# the two equal): kept in syncs.csv, never counted
HAZARD_KINDS = ("pageable_staged",)
PER = 1000
COLUMNS = [*CELL, *SITE, "kind", "footing", "step_kind", "syncs", "steps_synced", "steps",
           "per_step", "per_1000_steps"]  # fmt: skip


def site_rates(counts: pd.DataFrame, syncs: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, site): its footing (steady / occasional), the step kind it syncs in
    (steady sites; occasional sites: the kinds it synced in, joined), its syncs, the measured
    steps it synced in and those of its cell, and its rate per step of its kind (steady) or
    per 1,000 measured steps (occasional)."""
    kinds = step_kinds(counts)
    rows = measured(syncs[~syncs["kind"].isin(HAZARD_KINDS)], counts)
    if rows.empty or kinds.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = rows.merge(kinds, on=[*CELL, "step"], how="inner")
    per_kind = kinds.groupby([*CELL, "step_kind"]).size().rename("kind_steps").reset_index()
    per_cell = kinds.groupby(CELL).size().rename("steps").reset_index()
    by_site_kind = (
        rows.groupby([*CELL, *SITE, "step_kind"])
        .agg(syncs=("step", "size"), steps_synced=("step", "nunique"))
        .reset_index()
        .merge(per_kind, on=[*CELL, "step_kind"])
    )
    out = []
    for key, group in by_site_kind.groupby([*CELL, *SITE], sort=False):
        every = group[group["steps_synced"] == group["kind_steps"]]
        kind_of = rows.loc[_select(rows, key), "kind"]
        base = dict(zip([*CELL, *SITE], key), kind="+".join(sorted(set(kind_of))))
        if len(every) == len(group):  # syncs in every step of each kind it syncs in
            for _, g in group.iterrows():
                out.append({**base, "footing": "steady", "step_kind": g["step_kind"],
                            "syncs": int(g["syncs"]), "steps_synced": int(g["steps_synced"]),
                            "steps": int(g["kind_steps"]),
                            "per_step": g["syncs"] / g["kind_steps"]})  # fmt: skip
        else:
            out.append({**base, "footing": "occasional",
                        "step_kind": "+".join(sorted(group["step_kind"])),
                        "syncs": int(group["syncs"].sum()),
                        "steps_synced": int(group["steps_synced"].sum())})  # fmt: skip
    df = pd.DataFrame(out).merge(per_cell, on=CELL, how="left", suffixes=("", "_cell"))
    occasional = df["footing"] == "occasional"
    df.loc[occasional, "steps"] = df.loc[occasional, "steps_cell"]
    df["per_1000_steps"] = df["syncs"] / df["steps"] * PER
    df.loc[~occasional, "per_1000_steps"] = float("nan")
    return df.drop(columns="steps_cell").reindex(columns=COLUMNS)


def _select(df: pd.DataFrame, key: tuple) -> pd.Series:
    mask = pd.Series(True, index=df.index)
    for col, value in zip([*CELL, *SITE], key):
        mask &= df[col] == value
    return mask


KEY = [*CELL, *SITE, "footing", "step_kind"]


def rate_differences(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The sites of two runs' `site_rates` whose syncs or steps differ, or that one run lacks:
    KEY, then syncs, steps and per_1000_steps of each (suffixes _a, _b). Empty when the two
    runs sync alike, site by site."""
    shown = [*KEY, "syncs", "steps", "per_1000_steps"]
    both = a[shown].merge(b[shown], on=KEY, how="outer", suffixes=("_a", "_b"))
    same = (both["syncs_a"] == both["syncs_b"]) & (both["steps_a"] == both["steps_b"])
    return both[~same].reset_index(drop=True)
