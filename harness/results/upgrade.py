"""Older result formats, upgraded on read, so committed evidence keeps opening.

A run folder keeps the bytes its run wrote (their sha256 in meta.json vouches for them); what
changed between formats is applied in memory when it is read, one registered step per version
(asv keeps versioned results the same way). Each step knows what its older version meant:
where it kept a world's case, which world a run was of, which tables and columns it lacked.
Runs older than the oldest step (before checksums, format 3) cannot be vouched for and are
refused by the reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.results.tables import COLUMNS, FORMAT_VERSION

Meta = dict[str, Any]


@dataclass(frozen=True)
class Step:
    """From `version` to version + 1: the meta.json's keys, and each table's columns (a table
    the older version did not write comes in empty)."""

    version: int
    meta: Callable[[Meta], Meta]
    table: Callable[[str, pd.DataFrame, Meta], pd.DataFrame]
    new_tables: tuple[str, ...] = ()


STEPS: dict[int, Step] = {}


def step(version: int, *, new_tables: tuple[str, ...] = ()) -> Callable:
    """Register `meta` and `table` functions (a class holding both) as the step from
    `version`."""

    def register(cls: type) -> type:
        STEPS[version] = Step(version, cls.meta, cls.table, new_tables)
        return cls

    return register


def oldest_readable() -> int:
    return min(STEPS, default=FORMAT_VERSION)


def upgrade_meta(meta: Meta) -> Meta:
    """meta.json as this format's reader expects it; `upgraded_from` names the version the run
    wrote (absent when it wrote this one)."""
    version = meta["result_format_version"]
    if version == FORMAT_VERSION:
        return meta
    out = dict(meta)
    for v in range(version, FORMAT_VERSION):
        out = STEPS[v].meta(out)
    out["upgraded_from"] = version
    out["result_format_version"] = FORMAT_VERSION
    return out


def written_tables(meta: Meta) -> set[str]:
    """The tables a run of meta's original version wrote (newer ones come in empty)."""
    later = {t for v, s in STEPS.items() if v >= meta.get("upgraded_from", FORMAT_VERSION)
             for t in s.new_tables}  # fmt: skip
    return set(COLUMNS) - later


def upgrade_table(name: str, df: pd.DataFrame, meta: Meta) -> pd.DataFrame:
    """Table `name` as read from a run of meta's original version, in this format's columns
    (in their order)."""
    first = meta.get("upgraded_from", FORMAT_VERSION)
    if first == FORMAT_VERSION:
        return df
    df = df.copy()
    for v in range(first, FORMAT_VERSION):
        df = STEPS[v].table(name, df, meta)
    ours = [c for c in COLUMNS[name] if c in df.columns]
    return df[ours + [c for c in df.columns if c not in COLUMNS[name]]]


@step(4)
class _CaseColumn:
    """5: a case column; format 4 kept a world's case in another column (a sync-cost case in
    `variant`, with `mirror` "none"; a DP cell as `<scenario>/<cell>` in `scenario`), and its
    meta.json did not name the world: the scenario's sections tell (a `dp` or `sync_cost`
    section, else the serving world: the three worlds there were). syncs.csv gained thread,
    pid and detector."""

    @staticmethod
    def meta(meta: Meta) -> Meta:
        config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
        if meta.get("dp"):  # its cells were named `<scenario>/<cell>` like its rows
            cells = {k.split("/", 1)[-1]: v for k, v in meta["dp"].get("cells", {}).items()}
            return {**meta, "world": "dp", "dp": {**meta["dp"], "cells": cells}}
        return {**meta, "world": "sync_cost" if config.get("sync_cost") else "serving"}

    @staticmethod
    def table(name: str, df: pd.DataFrame, meta: Meta) -> pd.DataFrame:
        df["case"] = ""
        if meta["world"] == "dp":
            parts = df["scenario"].astype(str).str.split("/", n=1)
            df["case"] = parts.str[1].fillna("")
            df["scenario"] = parts.str[0]
        elif meta["world"] == "sync_cost":
            df["case"] = df["variant"]
            df["variant"] = df["mirror"] = ""
        if name == "syncs":
            for column in ("thread", "pid", "detector"):
                df[column] = ""
        return df


@step(5, new_tables=("waits",))
class _ArmAndProcess:
    """6: an arm column (no A/A arm then) and a process column (one process then); waits.csv
    did not exist."""

    @staticmethod
    def meta(meta: Meta) -> Meta:
        return meta

    @staticmethod
    def table(name: str, df: pd.DataFrame, meta: Meta) -> pd.DataFrame:
        df["arm"] = ""
        df["process"] = 0
        return df


# what format 7 added: no step was traced, a call's start in its step was not kept
_ADDED_IN_7 = {
    "latency": {"traced": 0},
    "waits": {"start_us": float("nan"), "idle_after_us": float("nan"), "traced": 0},
}


@step(6)
class _Traced:
    """7: a traced column in latency.csv and waits.csv (the time pass's traced rounds), and
    each wait's start and the device idle after it in waits.csv."""

    @staticmethod
    def meta(meta: Meta) -> Meta:
        return meta

    @staticmethod
    def table(name: str, df: pd.DataFrame, meta: Meta) -> pd.DataFrame:
        for column, value in _ADDED_IN_7.get(name, {}).items():
            df[column] = value
        return df
