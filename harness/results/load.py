"""Read a run folder (results/runs/<scenario>/<run-id>/) into DataFrames.

Reads files only: the summary, compare and the report must work on a laptop that has the
results but not the backend, so nothing here imports torch, matplotlib or a world; the column
definitions come from harness.results.tables (constants only), the format's single source of
truth.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.errors import InputError
from harness.results.files import OutputPlan

# The runner's table definitions are the file format's single source of truth, and
# harness.results.read its one reader; these modules hold constants and file helpers only.
from harness.results.read import read_json_file, read_meta, read_table
from harness.results.run_folder import DEFAULT_ROOT, is_complete, meta_json, result_files
from harness.results.tables import CELL_KEYS as _CELL_KEYS
from harness.results.tables import COLUMNS, MEASURED_PATHS
from harness.results.tables import ROW_KEYS as _ROW_KEYS

__all__ = [
    "CELL_KEYS",
    "FRAMES",
    "MEASURED_PATHS",
    "ROW_KEYS",
    "RunData",
    "combine_runs",
    "find_runs",
    "load_run",
    "reading",
    "rows_of",
]

RUNS_ROOT = DEFAULT_ROOT
# Lists, not the runner's tuples: pandas reads a tuple passed to groupby as one key.
CELL_KEYS = list(_CELL_KEYS)
ROW_KEYS = list(_ROW_KEYS)
_TO_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
# Every frame of a RunData: the tables, then the traced steps' rows split off two of them.
TRACED = {"traced_latency": "latency", "traced_waits": "waits"}
FRAMES = (*COLUMNS, *TRACED)


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
    waits: pd.DataFrame
    stacks: dict = field(default_factory=dict)
    # the steps of the time pass's traced rounds (device tracer on), apart from the others
    traced_latency: pd.DataFrame = field(default_factory=pd.DataFrame)
    traced_waits: pd.DataFrame = field(default_factory=pd.DataFrame)
    title: str = ""  # set for several runs shown together
    files: list[Path] = field(default_factory=list)  # the run folders' files it was read from
    parts: list[RunData] = field(default_factory=list)  # the runs shown together, if several

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

    @property
    def worlds(self) -> dict[str, str]:
        """The world of each scenario in the run (several for runs shown together)."""
        if "worlds" in self.meta:
            return dict(self.meta["worlds"])
        return {str(self.meta.get("scenario")): str(self.meta.get("world"))}


def reading(run: RunData) -> OutputPlan:
    """The output plan of a command that reads `run`: its run folders' files are inputs."""
    plan = OutputPlan()
    for f in run.files:
        plan.read(f, "RUN")
    return plan


def rows_of(run: RunData, world: str) -> RunData:
    """The run's rows of one world's scenarios (all of a run of that world; none of a run of
    another; of runs shown together, that world's run as it was read, meta.json included, or
    the rows of that world's runs)."""
    scenarios = [s for s, w in run.worlds.items() if w == world]
    parts = [p for p in run.parts if _scenario(p) in scenarios]
    if len(parts) == 1:
        return parts[0]

    def ours(df: pd.DataFrame) -> pd.DataFrame:
        return df[df["scenario"].isin(scenarios)] if "scenario" in df else df

    return dataclasses.replace(run, parts=parts, **{t: ours(getattr(run, t)) for t in FRAMES})


def _scenario(run: RunData) -> str:
    return str(run.meta.get("scenario") or run.path.parent.name)


def find_runs(root: Path = RUNS_ROOT) -> list[Path]:
    """Complete run folders under root, oldest first (by meta start time, then mtime)."""
    runs = [p.parent for p in Path(root).glob("*/*/meta.json") if is_complete(p.parent)]

    def key(p: Path) -> tuple[str, float]:
        try:
            start = str(meta_json(p).get("start_time", ""))
        except (OSError, ValueError, AttributeError):  # unreadable, not JSON, not a mapping
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
    read_meta(path)  # missing, not JSON, another format: said as such, not as "incomplete"
    if not is_complete(path):
        raise InputError("run is incomplete (interrupted or still running)", file=str(path))
    return path


def load_run(run: str | Path | None = None, root: Path = RUNS_ROOT) -> RunData:
    """Load a run folder (None: the newest complete run under root); every file is checked
    against meta.json (a cut-off or emptied table is an InputError naming it)."""
    folder = resolve_run(run, root)
    meta = read_meta(folder)
    frames = {name: read_table(folder, name, meta) for name in COLUMNS}
    lat = frames["latency"]
    scale = lat["unit"].astype(str).map(_TO_US)
    if len(lat) and scale.isna().any():
        bad = sorted(set(lat["unit"][scale.isna()].astype(str)))
        raise InputError(f"unknown unit(s) {bad}", file=str(folder / "latency.csv"), key="unit")
    lat["value_us"] = lat["value"] * scale
    for split, table in TRACED.items():  # traced steps never mix with the others
        df = frames[table]
        traced = df["traced"] == 1
        frames[split], frames[table] = df[traced], df[~traced]
    stacks = read_json_file(folder, "stacks.json", meta)
    if not isinstance(stacks, dict):  # stack id -> frames
        raise InputError(
            f"expected a mapping of stack ids to stacks, got {type(stacks).__name__}",
            file=str(folder / "stacks.json"),
        )
    files = result_files(folder, meta)
    return RunData(path=folder, meta=meta, stacks=stacks, files=files, **frames)


def combine_runs(runs: list[RunData]) -> RunData:
    """Several runs of different scenarios as one, to draw scenarios side by side."""
    if len(runs) == 1:
        return runs[0]
    scenarios = [_scenario(r) for r in runs]
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
        "worlds": {s: w for r in runs for s, w in r.worlds.items()},
    }
    frames = {
        name: pd.concat([getattr(r, name) for r in runs], ignore_index=True) for name in FRAMES
    }
    stacks = {k: v for r in runs for k, v in r.stacks.items()}
    title = " + ".join(f"{r.path.parent.name}/{r.path.name}" for r in runs)
    files = [f for r in runs for f in r.files]
    parts = [p for r in runs for p in (r.parts or [r])]
    return RunData(
        path=runs[0].path,
        meta=meta,
        stacks=stacks,
        title=title,
        files=files,
        parts=parts,
        **frames,
    )
