"""The tidy tables of a run folder: column lists, and atomic CSV / JSON writing.

One row per observation (long format); a value with a unit has a unit column. Keys are the
same across tables so they join: (scenario, variant, mirror, batch_size, rank, step,
forward_mode, path, region).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

FORMAT_VERSION = 2

# rank: the torch.distributed rank that ran the row (0 in single-rank scenarios)
CELL_KEYS = ("scenario", "variant", "mirror", "batch_size", "rank")
ROW_KEYS = (*CELL_KEYS, "step", "forward_mode", "path", "region")

COLUMNS: dict[str, tuple[str, ...]] = {
    # one row per (step, forward_mode, path, region) a step entered, zero-sync rows included
    "counts": (*ROW_KEYS, "syncs"),
    # one row per sync event
    "syncs": (*ROW_KEYS, "kind", "op", "location", "function", "stack_id", "nbytes"),
    # one row per raw sample: metric host | device | e2e; device: cuda | emu
    # start_us: where the sample began, in µs after the start of its step (0 for whole steps)
    "latency": (*ROW_KEYS, "device", "metric", "value", "unit", "start_us"),
    # one row per (cell, pass): ok, or the failure and where it was raised
    "outcomes": (
        *CELL_KEYS,
        "pass",
        "status",
        "mirror_effective",
        "steps_done",
        "exception",
        "message",
        "location",
        "function",
        "wall_s",
    ),
    # one row per finding (e.g. stale_mirror: host values used that differ from the device's)
    "findings": (*CELL_KEYS, "pass", "step", "forward_mode", "path", "kind", "detail"),
}

# Paths of measured steps; "warmup" and "capture" rows are kept apart (never per-step figures).
MEASURED_PATHS = ("graph", "eager")
UNMEASURED_PATHS = ("setup", "capture", "warmup")
NO_TAG = ""  # a missing tag (e.g. no forward mode outside a forward pass)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write then rename: a reader sees the old file or the whole new one, never a torn one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def write_csv(path: Path, table: str, rows: Iterable[Sequence[Any]]) -> int:
    """Write `rows` (tuples in COLUMNS[table] order) atomically; returns the row count."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS[table])
    n = 0
    for row in rows:
        w.writerow("" if v is None else v for v in row)
        n += 1
    write_atomic(path, buf.getvalue())
    return n


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
