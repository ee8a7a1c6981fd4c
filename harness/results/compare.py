"""Two run folders side by side: syncs per measured step, and latency percentiles."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.errors import InputError
from harness.results.read import read_table
from harness.results.run_folder import is_complete
from harness.results.summary import latency_percentiles, syncs_per_step
from harness.results.tables import CELL_KEYS

SYNC_KEYS = [*CELL_KEYS, "forward_mode", "region"]
LAT_KEYS = [*CELL_KEYS, "device", "metric", "unit"]


def _check(folder: Path) -> None:
    if not (folder / "meta.json").is_file():
        raise InputError("not a run folder (no meta.json)", file=str(folder))
    if not is_complete(folder):
        raise InputError("run is incomplete (interrupted or still running)", file=str(folder))


def sync_diff(a: Path, b: Path, show_all: bool = False) -> pd.DataFrame:
    pa = syncs_per_step(read_table(a, "counts")).set_index(SYNC_KEYS)["syncs_per_step"]
    pb = syncs_per_step(read_table(b, "counts")).set_index(SYNC_KEYS)["syncs_per_step"]
    df = pd.concat([pa.rename("A"), pb.rename("B")], axis=1)
    df["B-A"] = df["B"].fillna(0) - df["A"].fillna(0)
    if not show_all:
        df = df[(df["B-A"] != 0) | df["A"].isna() | df["B"].isna()]
        df = df[~((df["A"].fillna(0) == 0) & (df["B"].fillna(0) == 0))]
    return df.sort_index()


def latency_diff(a: Path, b: Path) -> pd.DataFrame:
    la = latency_percentiles(read_table(a, "latency")).set_index(LAT_KEYS)
    lb = latency_percentiles(read_table(b, "latency")).set_index(LAT_KEYS)
    cols = ["p50", "p90", "p99"]
    df = pd.concat([la[cols].add_suffix(" A"), lb[cols].add_suffix(" B")], axis=1)
    df["p50 B/A"] = df["p50 B"] / df["p50 A"]
    return df.sort_index()


def compare_runs(a: Path, b: Path, show_all: bool = False) -> str:
    for folder in (a, b):
        _check(folder)
    parts = [f"A = {a}\nB = {b}\n", "Syncs per measured step (A, B, B-A):"]
    sd = sync_diff(a, b, show_all)
    if sd.empty:
        parts.append("(no difference)" if not show_all else "(no measured steps)")
    else:
        parts.append(sd.to_string(float_format=lambda v: f"{v:.2f}", na_rep="—"))
    parts.append("\nLatency per scheduler iteration, µs (p50 / p90 / p99):")
    ld = latency_diff(a, b)
    if ld.empty:
        parts.append("(no time pass in either run)")
    else:
        parts.append(ld.to_string(float_format=lambda v: f"{v:.2f}", na_rep="—"))
    return "\n".join(parts)
