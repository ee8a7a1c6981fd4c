"""Read a run folder (results/runs/<scenario>/<run-id>/) into DataFrames.

Reads files only: the report must work on a laptop that has the results but not the backend,
so nothing here imports harness.backend, harness.serving or torch; the column definitions come
from harness.results.tables (constants only), the format's single source of truth.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.errors import InputError

# The runner's table definitions are the file format's single source of truth; these modules
# hold constants and file helpers only (no torch, no backend).
from harness.results.run_folder import DEFAULT_ROOT, is_complete
from harness.results.tables import CELL_KEYS as _CELL_KEYS
from harness.results.tables import COLUMNS as RESULT_COLUMNS
from harness.results.tables import MEASURED_PATHS
from harness.results.tables import ROW_KEYS as _ROW_KEYS

__all__ = [
    "CELL_KEYS",
    "MEASURED_PATHS",
    "ROW_KEYS",
    "RunData",
    "combine_runs",
    "find_runs",
    "load_run",
]

RUNS_ROOT = DEFAULT_ROOT
# Lists, not the runner's tuples: pandas reads a tuple passed to groupby as one key.
CELL_KEYS = list(_CELL_KEYS)
ROW_KEYS = list(_ROW_KEYS)
# The optional latency column `start_us` (region start, from the iteration's start) is used by
# the trace when present; without it the trace lays regions out from their exit order.
COLUMNS: dict[str, list[str]] = {name: list(cols) for name, cols in RESULT_COLUMNS.items()}
# What the report reads; other columns of the format are optional here, so runs written
# before a column was added still load.
REQUIRED: dict[str, list[str]] = {
    "counts": [*ROW_KEYS, "syncs"],
    "syncs": [*ROW_KEYS, "kind", "op", "location", "function", "stack_id"],
    "latency": [*ROW_KEYS, "metric", "value", "unit"],
    "outcomes": [*CELL_KEYS, "status"],
    "findings": [*CELL_KEYS, "step", "kind"],
}
_NUMERIC = ("value", "nbytes", "start_us", "syncs", "step", "batch_size")
_TO_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


@dataclass
class RunData:
    """Everything the plots need from one run folder."""

    path: Path
    meta: dict
    counts: pd.DataFrame
    syncs: pd.DataFrame
    latency: pd.DataFrame
    outcomes: pd.DataFrame
    findings: pd.DataFrame
    stacks: dict = field(default_factory=dict)
    title: str = ""  # set for several runs shown together

    @property
    def device(self) -> str:
        """'cuda' or 'emu' (emulated device: host times only)."""
        dev = str(self.meta.get("device_kind") or "unknown")
        return "emu" if dev.lower() in {"emu", "emulated", "meta", "cpu"} else dev.lower()

    @property
    def is_emulated(self) -> bool:
        return self.device == "emu"

    @property
    def label(self) -> str:
        """Short provenance line for figure titles."""
        where = (
            "emulated device (host times only)"
            if self.is_emulated
            else self.meta.get("gpu_name") or self.device
        )
        return f"{self.title or f'{self.path.parent.name}/{self.path.name}'} · {where}"


def _read_csv(folder: Path, name: str) -> pd.DataFrame:
    path = folder / f"{name}.csv"
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS[name]})
    # keep_default_na=False: "" is a real value for some keys (e.g. no forward mode) and must
    # not become NaN, which groupby would silently drop.
    df = pd.read_csv(path, keep_default_na=False, na_values={c: [""] for c in _NUMERIC})
    missing = [c for c in REQUIRED[name] if c not in df.columns]
    if missing:  # a renamed or dropped column must fail loudly, not plot as empty
        raise InputError(f"missing column(s) {missing}", file=str(path), key=missing[0])
    for col in COLUMNS[name]:  # columns the report can do without (older runs lack some)
        if col not in df.columns:
            df[col] = ""
    return df


def _numeric(df: pd.DataFrame, cols: list[str]) -> None:
    for col in cols:
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce")


def find_runs(root: Path = RUNS_ROOT) -> list[Path]:
    """Complete run folders under root, oldest first (by meta start time, then mtime)."""
    runs = [p.parent for p in Path(root).glob("*/*/meta.json") if is_complete(p.parent)]

    def key(p: Path) -> tuple[str, float]:
        try:
            start = str(json.loads((p / "meta.json").read_text()).get("start_time", ""))
        except (OSError, json.JSONDecodeError):
            start = ""
        return (start, (p / "meta.json").stat().st_mtime)

    return sorted(runs, key=key)


def resolve_run(run: str | Path | None, root: Path = RUNS_ROOT) -> Path:
    """The run folder to report on: the one given, or the newest complete one."""
    if run is None or str(run) == "":
        runs = find_runs(root)
        if not runs:
            raise InputError(
                "no complete run found; run `make bench SCENARIO=nonspec` first", file=str(root)
            )
        return runs[-1]
    path = Path(run)
    if not (path / "meta.json").is_file():
        raise InputError("not a run folder (no meta.json)", file=str(path))
    if not is_complete(path):
        raise InputError("run is incomplete (interrupted or still running)", file=str(path))
    return path


def load_run(run: str | Path | None = None, root: Path = RUNS_ROOT) -> RunData:
    """Load a run folder (None: the newest complete run under root)."""
    folder = resolve_run(run, root)
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc}", file=str(folder / "meta.json")) from exc
    frames = {name: _read_csv(folder, name) for name in COLUMNS}
    _numeric(frames["counts"], ["batch_size", "step", "syncs"])
    _numeric(frames["syncs"], ["batch_size", "step", "nbytes"])
    _numeric(frames["latency"], ["batch_size", "step", "value", "start_us"])
    _numeric(frames["outcomes"], ["batch_size"])
    _numeric(frames["findings"], ["batch_size", "step"])
    lat = frames["latency"]
    scale = lat["unit"].astype(str).map(_TO_US)
    if len(lat) and scale.isna().any():
        bad = sorted(set(lat["unit"][scale.isna()].astype(str)))
        raise InputError(f"unknown unit(s) {bad}", file=str(folder / "latency.csv"), key="unit")
    lat["value_us"] = lat["value"] * scale
    stacks_path = folder / "stacks.json"
    stacks = json.loads(stacks_path.read_text()) if stacks_path.is_file() else {}
    return RunData(path=folder, meta=meta, stacks=stacks, **frames)


def combine_runs(runs: list[RunData]) -> RunData:
    """Several runs of different scenarios as one, to draw scenarios side by side."""
    if len(runs) == 1:
        return runs[0]
    scenarios = [str(r.meta.get("scenario") or r.path.parent.name) for r in runs]
    if len(set(scenarios)) < len(scenarios):
        # rows of two runs of one scenario share every key: per-step counts would double
        raise InputError(
            "runs to show together must be of different scenarios "
            "(compare two runs of one scenario with `python -m harness compare`)",
            key=", ".join(str(r.path) for r in runs),
        )
    devices = {r.meta.get("device_kind") for r in runs}
    gpus = {r.meta.get("gpu_name") for r in runs}
    meta = {
        "device_kind": devices.pop() if len(devices) == 1 else "mixed devices",
        "gpu_name": gpus.pop() if len(gpus) == 1 else None,
        "runs": [str(r.path) for r in runs],
    }
    frames = {
        name: pd.concat([getattr(r, name) for r in runs], ignore_index=True) for name in COLUMNS
    }
    stacks = {k: v for r in runs for k, v in r.stacks.items()}
    title = " + ".join(f"{r.path.parent.name}/{r.path.name}" for r in runs)
    return RunData(path=runs[0].path, meta=meta, stacks=stacks, title=title, **frames)
