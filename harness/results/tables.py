"""The tidy tables of a run folder: column lists, and their CSV text.

One row per observation (long format); a value with a unit has a unit column. Keys are the
same across tables so they join: (scenario, case, variant, mirror, batch_size, rank, step,
forward_mode, path, region). A column means one thing in every world: `scenario` is the
scenario's name, `case` the world's own case of the cell (a sync-cost case, a DP cell, a
program; empty in the serving world), `variant`, `mirror` and `batch_size` the backend
variant, mirror setting and requests per batch (empty, or 0, where a world has none).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

# 3: meta.json holds each file's sha256 (readers refuse a file that does not match)
# 4: latency.csv has a round column (the time pass interleaves cells in rounds)
# 5: a case column; scenario, variant and mirror no longer hold a world's case (meta.json
#    names the run's world); syncs.csv has each event's thread, pid and detector
# 6: an arm column (the A/A arm: a second, independently built reference cell) and a process
#    column in every table (the worker process of `--repeats N` that made the row); waits.csv
# 7: a traced column in latency.csv and waits.csv (1: a step of the time pass's traced rounds,
#    device tracer on); waits.csv has each call's start_us and, traced, its idle_after_us.
#    Runs of format 6 are upgraded when read (harness.results.read): nothing was traced.
FORMAT_VERSION = 7
RESULT_FORMAT = "dsv4-harness-run"  # meta.json's result_format: what kind of folder it is

# rank: the torch.distributed rank that ran the row (0 in single-rank scenarios)
# arm: "" for a cell of the scenario; AA_ARM for the time pass's second, independently built
#   cell of the reference variant (its Δ against the first is the run's noise floor)
CELL_KEYS = ("scenario", "case", "variant", "mirror", "batch_size", "rank", "arm")
AA_ARM = "aa"
# process: the worker process that made the row, 0..N-1 with `--repeats N` (0 in a run of one
#   process); the last column of every table
ROW_KEYS = (*CELL_KEYS, "step", "forward_mode", "path", "region")

# The columns a pass's rows hold; the `process` column is appended by whoever gathers them.
PASS_COLUMNS: dict[str, tuple[str, ...]] = {
    # one row per (step, forward_mode, path, region) a step entered, zero-sync rows included
    "counts": (*ROW_KEYS, "syncs"),
    # one row per sync event: where it was made, and which thread, process and detector saw it
    "syncs": (
        *ROW_KEYS,
        "kind",
        "op",
        "location",
        "function",
        "stack_id",
        "nbytes",
        "thread",
        "pid",
        "detector",
    ),
    # one row per raw sample: metric host | device | e2e; device: cuda | emu
    # start_us: where the sample began, in µs after the start of its step (0 for whole steps)
    # round: the time pass's round of interleaved cells the step ran in (empty: set-up, warm-up)
    # traced: 1 for a step of a traced round (device tracer on: metrics busy and span too)
    "latency": (*ROW_KEYS, "device", "metric", "value", "unit", "start_us", "round", "traced"),
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
    # one row per synchronizing call of a measured step in the time pass: the host's wait
    # inside the call, ns (ledger off; only sync sites pay for the clock); start_us: when the
    # call began, µs after the start of its step; idle_after_us (traced steps only): the device
    # idle from the call until the step's next synchronizing call or the end of its device work
    "waits": (*ROW_KEYS, "site", "kind", "wait_ns", "start_us", "idle_after_us", "traced"),
}
COLUMNS = {name: (*cols, "process") for name, cols in PASS_COLUMNS.items()}

# Paths of measured steps; "warmup" and "capture" rows are kept apart (never per-step figures).
MEASURED_PATHS = ("graph", "eager")
NO_TAG = ""  # a missing tag (e.g. no forward mode outside a forward pass)


def csv_text(table: str, rows: Iterable[Sequence[Any]]) -> tuple[str, int]:
    """`rows` (tuples in COLUMNS[table] order) as CSV text under the header; and the row count."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS[table])
    n = 0
    width = len(COLUMNS[table])
    for row in rows:
        if len(row) != width:  # a writer that forgot a column must not shift the others
            raise ValueError(f"{table}: a row of {len(row)} values, not {width}: {row!r}")
        w.writerow("" if v is None else v for v in row)
        n += 1
    return buf.getvalue(), n
