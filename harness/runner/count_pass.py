"""The count pass: every step of every cell under the sync ledger.

Phases of a cell, kept apart in the rows by their `path`:
- setup: building the world and `warmup_and_capture()` (the world tags "warmup"/"capture";
  untagged events there read "setup"), step -1;
- warm-up scheduler steps: path "warmup", steps 0..W-1;
- measured steps: the world's own path ("graph" / "eager"), steps W..W+N-1; rows outside a
  forward pass (scheduler regions, the step region) take the step's path: "eager" when any
  pass of the step ran eagerly, else "graph".
Events and region entries are attributed to a step by their position in the ledger, so the
runner does not depend on how (or whether) the world numbers its steps.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

import torch

from harness.runner.cells import Cell, WorldBuilder, build_scenario_world, cells
from harness.runner.progress import Progress
from harness.runner.rows import (
    effective_mirror,
    failure_info,
    finding_row_parts,
    step_path,
    tag_value,
)
from harness.scenario import Scenario
from syncledger import SyncLedger, set_step

SETUP_STEP = -1


@dataclass
class PassRows:
    """Rows of the tidy tables (tuples in harness.results.tables.COLUMNS order)."""

    counts: list[tuple] = field(default_factory=list)
    syncs: list[tuple] = field(default_factory=list)
    latency: list[tuple] = field(default_factory=list)
    outcomes: list[tuple] = field(default_factory=list)
    findings: list[tuple] = field(default_factory=list)
    waits: list[tuple] = field(default_factory=list)
    stacks: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # for meta.json (e.g. device_trace)

    def extend(self, other: PassRows) -> None:
        for name in TABLES:
            getattr(self, name).extend(getattr(other, name))
        self.stacks.update(other.stacks)
        self.notes.update(other.notes)

    def with_process(self, process: int) -> PassRows:
        """The rows with their last column, `process`, appended (the passes leave it off: the
        process that made a row is known to whoever gathers the rows)."""
        out = PassRows(stacks=dict(self.stacks), notes=dict(self.notes))
        for name in TABLES:
            getattr(out, name).extend((*r, process) for r in getattr(self, name))
        return out


TABLES = ("counts", "syncs", "latency", "outcomes", "findings", "waits")


def stack_id(stack: tuple) -> str:
    return hashlib.sha1(repr(stack).encode()).hexdigest()[:12]


class _CellRecorder:
    def __init__(self, scenario: str, cell: Cell, rank: int = 0):
        self.cell_key = cell.key(scenario, rank)
        self.rows = PassRows()

    def take(self, led: SyncLedger, ev0: int, re0: int, step: int, phase_path: str | None):
        """Rows for the ledger's events and region entries recorded since (ev0, re0).

        `phase_path` overrides the path of everything (warm-up steps: "warmup"); otherwise
        rows outside a forward pass (no path tag: scheduler regions, the step itself) take the
        step's path: "eager" when any pass of the step ran eagerly, else "graph" (during
        setup: "setup")."""
        entries = led.region_entries[re0:]
        events = led.events[ev0:]
        untagged = phase_path or self._step_path(entries, step)
        counts: dict[tuple, int] = {}
        for entry in entries:
            counts.setdefault(self._key(entry.tags, entry.region, step, phase_path, untagged), 0)
        for e in events:
            key = self._key(e.tags, e.region, step, phase_path, untagged)
            counts[key] = counts.get(key, 0) + e.is_sync  # hazards: in syncs.csv, not counted
            frames = trim_stack(e.stack)
            sid = stack_id(frames)
            if sid not in self.rows.stacks:
                self.rows.stacks[sid] = [f"{f}:{ln} in {fn}" for f, ln, fn in frames]
            where = (e.location, e.function, sid, e.nbytes, e.thread, e.pid, e.detector)
            self.rows.syncs.append((*key, str(e.kind), e.op, *where))
        self.rows.counts.extend((*k, n) for k, n in counts.items())
        return len(led.events), len(led.region_entries)

    @staticmethod
    def _step_path(entries, step: int) -> str:
        if step == SETUP_STEP:
            return "setup"
        return step_path(tag_value(e.tags, "path") for e in entries)

    def _key(self, tags, region: str, step: int, phase_path: str | None, untagged: str) -> tuple:
        path = phase_path or tag_value(tags, "path") or untagged
        return (*self.cell_key, step, tag_value(tags, "forward_mode"), path, region)


# Frames of the runner and the command line say nothing about the code under test, and would
# make stack ids differ between `bench` and `gate`.
_RUNNER_FRAMES = (
    os.path.join("harness", "runner") + os.sep,
    os.path.join("harness", "gate") + os.sep,
    os.path.join("harness", "commands") + os.sep,
    os.path.join("harness", "cli.py"),
    os.path.join("harness", "__main__.py"),
    os.sep + "_pytest" + os.sep,
    os.sep + "pluggy" + os.sep,
)


def trim_stack(stack: tuple) -> tuple:
    """The stack up to (not including) the runner's own frames, innermost first."""
    out = []
    for frame in stack:
        if any(m in frame[0] for m in _RUNNER_FRAMES):
            break
        out.append(frame)
    return tuple(out)


def run_cell_count(
    sc: Scenario,
    cell: Cell,
    device: torch.device,
    builder: WorldBuilder = build_scenario_world,
    progress: Progress | None = None,
) -> PassRows:
    rec = _CellRecorder(sc.name, cell)
    t0 = time.perf_counter()
    world = None
    done = 0
    status, exc_info = "ok", ("", "", "", "")
    led = SyncLedger()
    ev0 = re0 = 0
    try:
        with led:
            set_step(SETUP_STEP)
            try:
                world = builder(sc, cell, device)
                world.warmup_and_capture()
            finally:
                ev0, re0 = rec.take(led, ev0, re0, SETUP_STEP, None)
            for i in range(sc.steps.warmup + sc.steps.count):
                set_step(i)
                warm = i < sc.steps.warmup
                try:
                    world.step()
                finally:
                    ev0, re0 = rec.take(led, ev0, re0, i, "warmup" if warm else None)
                done += 1
                if progress is not None:
                    progress.advance()
    except Exception as exc:  # a failing cell is a result, not the end of the run
        status, exc_info = "error", failure_info(exc)
        if progress is not None:
            progress.skip(sc.steps.warmup + sc.steps.count - done)
    finally:
        set_step(None)
    mirror_eff = effective_mirror(world)
    rec.rows.outcomes.append(
        (
            *rec.cell_key,
            "count",
            status,
            mirror_eff,
            done,
            *exc_info,
            round(time.perf_counter() - t0, 3),
        )
    )
    for f in getattr(world, "findings", None) or []:
        step, forward_mode, path, kind, detail = finding_row_parts(f)
        rec.rows.findings.append((*rec.cell_key, "count", step, forward_mode, path, kind, detail))
    return rec.rows


def run_count_pass(
    sc: Scenario,
    device: torch.device,
    builder: WorldBuilder = build_scenario_world,
    show_progress: bool | None = None,
    only: list[Cell] | None = None,
) -> PassRows:
    """Every cell of the scenario (`only`: these cells of it), one after another."""
    out = PassRows()
    todo = cells(sc) if only is None else only
    with Progress(
        len(todo) * (sc.steps.warmup + sc.steps.count), f"{sc.name} count", show_progress
    ) as prog:
        for cell in todo:
            prog.describe(f"{sc.name} count {cell.label()}")
            out.extend(run_cell_count(sc, cell, device, builder, prog))
    return out
