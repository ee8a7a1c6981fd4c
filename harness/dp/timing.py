"""The time pass of a DP cell on one rank: raw host samples per region, no wait between steps.

The single-rank time pass waits for the device after every step (the read of that step's
result). Under DP attention the world's own step already does that read where the scheduler
does it (with overlap: the previous step's results, after launching this one), and a wait for
this step's work on top would drain the GPU before every exchange: a sync on one rank would
then stall nobody. So this loop never waits between steps. For the same reason a cell's
measured steps run back to back, in one round (``round`` 0), not interleaved with other cells:
a switch between cells would leave the other cell's work queued on the GPU, or, drained, start
with an empty pipeline; either changes what a sync costs. Per measured step it keeps:
- host time of every region exit (metric "host"), ``step/scheduler/dp_exchange`` among them:
  the time the rank waited there for the others;
- the whole iteration's host time (region "iteration");
- on CUDA, the device time between events recorded before and after the step (metric
  "device"), read once the last step is done.
Set-up and warm-up steps get host rows apart from the measured ones, as in the single-rank
pass; their rows and the outcome row have the same layout.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from harness.results.tables import CELL_KEYS, NO_TAG, PASS_COLUMNS
from harness.runner.cells import Cell, WorldBuilder
from harness.runner.count_pass import SETUP_STEP, PassRows
from harness.runner.rows import (
    effective_mirror,
    failure_info,
    finding_row_parts,
    step_path,
    tag_value,
)
from harness.runner.time_pass import ITERATION_REGION, SETUP_REGION
from harness.scenario import Scenario
from syncledger import region_timer, set_step

ROUND = 0  # a DP cell's measured steps: one round, back to back


def latency_row(**values: Any) -> tuple:
    """A latency row from its columns by name (columns the row does not know stay empty)."""
    return tuple(values.get(c) for c in PASS_COLUMNS["latency"])


class _TimedCell:
    """One cell on this rank: its world, its rows so far and how many steps ran."""

    def __init__(self, sc: Scenario, cell: Cell, device_kind: str) -> None:
        self.sc = sc
        self.device_kind = device_kind
        self.key = cell.key(sc.name)  # rank: set by rank 0 when it writes the run
        self.rows = PassRows()
        self.world: Any = None
        self.done = 0  # steps run, warm-up included

    def sample(
        self,
        step: int,
        mode: str,
        path: str,
        region: str,
        metric: str,
        us: float,
        start_us: float = 0.0,
        round_: int | None = None,  # None: set-up and warm-up, outside any round
    ) -> None:
        names = dict(zip(CELL_KEYS, self.key))
        self.rows.latency.append(
            latency_row(
                **names,
                step=step,
                forward_mode=mode,
                path=path,
                region=region,
                device=self.device_kind,
                metric=metric,
                value=us,
                unit="us",
                start_us=start_us,
                round=round_,
            )
        )

    def set_up(self, builder: WorldBuilder, cell: Cell, device: torch.device) -> None:
        """Build, capture and warm up; the set-up and every warm-up step get a host sample."""
        self.world = builder(self.sc, cell, device)
        t0 = time.perf_counter_ns()
        self.world.warmup_and_capture()
        self.sample(SETUP_STEP, NO_TAG, "capture", SETUP_REGION, "host", _since_us(t0))
        for i in range(self.sc.steps.warmup):
            set_step(i)
            t0 = time.perf_counter_ns()
            self.world.step()
            self.sample(i, NO_TAG, "warmup", ITERATION_REGION, "host", _since_us(t0))
            self.done += 1

    def measure(self) -> None:
        """The measured steps; samples are kept as each step finishes."""
        on_cuda = self.device_kind == "cuda"
        events: list[tuple[Any, Any, int, str]] = []
        with region_timer() as rt:
            for j in range(self.sc.steps.time_steps(self.device_kind)):
                step = self.sc.steps.warmup + j
                set_step(step)
                del rt.samples[:]
                if on_cuda:
                    ev0 = torch.cuda.Event(enable_timing=True)
                    ev1 = torch.cuda.Event(enable_timing=True)
                    ev0.record()
                t0 = time.perf_counter_ns()
                self.world.step()
                t1 = time.perf_counter_ns()
                if on_cuda:
                    ev1.record()
                path = self._keep_step(step, t0, t1, rt.samples)
                if on_cuda:
                    events.append((ev0, ev1, step, path))
                self.done += 1
        if on_cuda:  # one wait, after the last step
            torch.cuda.synchronize()
            for ev0, ev1, step, path in events:
                us = ev0.elapsed_time(ev1) * 1e3
                self.sample(step, NO_TAG, path, ITERATION_REGION, "device", us, round_=ROUND)

    def _keep_step(self, step: int, t0: int, t1: int, samples: list) -> str:
        """One row per region exit, then the whole iteration's; returns the step's path."""
        path = step_path(tag_value(tags, "path") for _r, _s, tags, _a, _b in samples)
        for name, _step, tags, a, b in samples:
            where = tag_value(tags, "path") or path
            us, start_us = (b - a) / 1e3, (a - t0) / 1e3
            mode = tag_value(tags, "forward_mode")
            self.sample(step, mode, where, name, "host", us, start_us, ROUND)
        self.sample(step, NO_TAG, path, ITERATION_REGION, "host", (t1 - t0) / 1e3, round_=ROUND)
        return path

    def finish(self, failure: tuple[str, str, str, str] | None, wall_s: float) -> PassRows:
        status = "ok" if failure is None else "error"
        exc_info = failure or ("", "", "", "")
        mirror = effective_mirror(self.world)
        self.rows.outcomes.append(
            (*self.key, "time", status, mirror, self.done, *exc_info, round(wall_s, 3))
        )
        for f in getattr(self.world, "findings", None) or []:
            step, forward_mode, path, kind, detail = finding_row_parts(f)
            self.rows.findings.append((*self.key, "time", step, forward_mode, path, kind, detail))
        return self.rows


def run_dp_cell_time(
    sc: Scenario, cell: Cell, device: torch.device, device_kind: str, builder: WorldBuilder
) -> PassRows:
    """One cell's time pass on this rank (every rank runs it at the same time)."""
    timed = _TimedCell(sc, cell, device_kind)
    t0 = time.perf_counter()
    failure = None
    try:
        timed.set_up(builder, cell, device)
        timed.measure()
    except Exception as exc:  # a failing cell is a result; the rank's job decides what follows
        failure = failure_info(exc)
    finally:
        set_step(None)
    return timed.finish(failure, time.perf_counter() - t0)


def _since_us(t0_ns: int) -> float:
    return (time.perf_counter_ns() - t0_ns) / 1e3
