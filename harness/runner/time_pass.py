"""The time pass: no ledger, regions only; raw samples, statistics later.

Cells are interleaved so that a noisy machine (clock changes, a neighbour's load) hits every
cell alike: all worlds are built, captured and warmed up first; then the measured steps run in
rounds, `steps.round_steps` steps per cell per round, the cells' order shuffled every round
with the scenario's seed. Each world keeps its own step sequence, so a cell's steps are the
same as if it ran alone; each sample records its round.

Per measured scheduler step:
- the host's wait inside each synchronizing call of the step (`syncledger.wait_timer`: only
  sync sites pay for it), one row per call in waits.csv;
- host time of every region exit (`syncledger.region_timer`, perf_counter_ns), metric "host";
- the whole iteration (region "iteration"): host time of `world.step()` (metric "host"); on
  CUDA also the device time between events recorded before and after it (metric "device") and
  the end-to-end time, from the iteration's start on the host until the GPU finished its work
  (metric "e2e"; a sync's pipeline bubble shows here, with the stand-in forward keeping the GPU
  busy).
On the emulated device only host times exist; their rows say device "emu".
An A/A arm: every cell of the world's reference variant (its vocabulary) gets a second,
independently built cell (column arm "aa") that runs the same steps interleaved with the
others; its Δ against the first is the run's measured noise floor.
Set-up (`warmup_and_capture`, step -1, path "capture", region "warmup_and_capture") and the
warm-up steps (path "warmup", region "iteration") get host-time rows too, apart from the
measured ones and outside any round.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from harness import registry
from harness.results.tables import AA_ARM, NO_TAG
from harness.results.vocabulary import ResultsPart
from harness.runner.cells import Cell, World, WorldBuilder, build_scenario_world, cells
from harness.runner.count_pass import SETUP_STEP, PassRows
from harness.runner.progress import Progress
from harness.runner.rows import (
    effective_mirror,
    failure_info,
    finding_row_parts,
    step_path,
    tag_value,
)
from harness.scenario import Scenario
from syncledger import RegionTimer, WaitSample, WaitTimer, region_timer, set_step, wait_timer

ITERATION_REGION = "iteration"
SETUP_REGION = "warmup_and_capture"


class _StepClock:
    """Times one scheduler step: host clock, and on CUDA events around it and the wait for the
    GPU (the server reads each step's result back; waiting here is that read). The waits of the
    step's own synchronizing calls are taken before the clock's own synchronize."""

    def __init__(self, on_cuda: bool, waits: WaitTimer):
        self.on_cuda = on_cuda
        self.waits = waits
        if on_cuda:
            self.ev0 = torch.cuda.Event(enable_timing=True)
            self.ev1 = torch.cuda.Event(enable_timing=True)

    def run(self, world: World) -> tuple[int, dict[str, float], list[WaitSample]]:
        """Run `world.step()`; returns its host start (ns), its metrics in µs and its waits."""
        del self.waits.samples[:]
        t0 = time.perf_counter_ns()
        if self.on_cuda:
            self.ev0.record()
        world.step()
        t1 = time.perf_counter_ns()
        waits = list(self.waits.samples)
        metrics = {"host": (t1 - t0) / 1e3}
        if self.on_cuda:
            self.ev1.record()
            self.ev1.synchronize()
            t2 = time.perf_counter_ns()
            metrics["device"] = self.ev0.elapsed_time(self.ev1) * 1e3
            metrics["e2e"] = (t2 - t0) / 1e3
        return t0, metrics, waits


@dataclass
class _TimedCell:
    """One cell of the time pass: its world, its rows so far, and whether it still runs."""

    sc: Scenario
    cell: Cell
    device_kind: str
    rows: PassRows = field(default_factory=PassRows)
    world: Any = None
    done: int = 0  # steps run, warm-up included
    failure: tuple[str, str, str, str] | None = None
    wall_s: float = 0.0

    @property
    def key(self) -> tuple:
        return self.cell.key(self.sc.name)

    @property
    def total(self) -> int:
        return self.sc.steps.warmup + self.sc.steps.time_steps(self.device_kind)

    def sample(
        self, where: tuple, metric: str, us: float, start_us: float = 0.0, round_: int | None = None
    ) -> None:
        """One latency row; `where` is (step, forward_mode, path, region)."""
        row = (*self.key, *where, self.device_kind, metric, us, "us", start_us, round_)
        self.rows.latency.append(row)

    def set_up(self, builder: WorldBuilder, device: torch.device, progress: Progress) -> None:
        """Build, capture and warm up; the set-up and every warm-up step get a host sample."""
        with self._running(progress):
            self.world = builder(self.sc, self.cell, device)
            t0 = time.perf_counter_ns()
            self.world.warmup_and_capture()
            us = (time.perf_counter_ns() - t0) / 1e3
            self.sample((SETUP_STEP, NO_TAG, "capture", SETUP_REGION), "host", us)
            for i in range(self.sc.steps.warmup):
                set_step(i)
                t0 = time.perf_counter_ns()
                self.world.step()
                us = (time.perf_counter_ns() - t0) / 1e3
                self.sample((i, NO_TAG, "warmup", ITERATION_REGION), "host", us)
                self._advance(progress)

    def run_round(
        self, n: int, round_: int, clock: _StepClock, timer: RegionTimer, progress: Progress
    ) -> None:
        """The cell's next n measured steps, each sample marked with the round."""
        with self._running(progress):
            for _ in range(n):
                step = self.done
                set_step(step)
                del timer.samples[:]
                t0, metrics, waits = clock.run(self.world)
                self._keep_step(step, t0, metrics, timer.samples, round_)
                self._keep_waits(step, waits, timer.samples)
                self._advance(progress)

    def _keep_step(self, step: int, t0: int, metrics: dict, samples: list, round_: int) -> None:
        """One row per region exit of the step, then the whole iteration's metrics."""
        path = step_path(tag_value(tags, "path") for _r, _s, tags, _a, _b in samples)
        for region, _step, tags, a, b in samples:
            where = (step, tag_value(tags, "forward_mode"), tag_value(tags, "path") or path, region)
            # start_us: where the region began inside its step
            self.sample(where, "host", (b - a) / 1e3, (a - t0) / 1e3, round_)
        for metric, us in metrics.items():
            self.sample((step, NO_TAG, path, ITERATION_REGION), metric, us, 0.0, round_)

    def _keep_waits(self, step: int, waits: list[WaitSample], samples: list) -> None:
        """One row per synchronizing call of the step: its site, kind and the host's wait."""
        path = step_path(tag_value(tags, "path") for _r, _s, tags, _a, _b in samples)
        for w in waits:
            where = (step, tag_value(w.tags, "forward_mode"), tag_value(w.tags, "path") or path)
            self.rows.waits.append((*self.key, *where, w.region, w.site, w.kind, w.wait_ns))

    def _advance(self, progress: Progress) -> None:
        self.done += 1
        progress.advance()

    @contextmanager
    def _running(self, progress: Progress) -> Iterator[None]:
        """Around the cell's work: its wall time, and a failure recorded as the cell's result
        (the pass goes on with the other cells; KeyboardInterrupt and the like end it)."""
        t0 = time.perf_counter()
        try:
            yield
        except Exception as exc:
            self.failure = failure_info(exc)
            progress.skip(self.total - self.done)
        finally:
            self.wall_s += time.perf_counter() - t0
            set_step(None)

    def finish(self) -> PassRows:
        """The cell's outcome and findings, after its last step."""
        status = "ok" if self.failure is None else "error"
        exc_info = self.failure or ("", "", "", "")
        mirror = effective_mirror(self.world)
        wall_s = round(self.wall_s, 3)
        self.rows.outcomes.append((*self.key, "time", status, mirror, self.done, *exc_info, wall_s))
        for f in getattr(self.world, "findings", None) or []:
            step, forward_mode, path, kind, detail = finding_row_parts(f)
            self.rows.findings.append((*self.key, "time", step, forward_mode, path, kind, detail))
        return self.rows


def _round_sizes(n_steps: int, per_round: int) -> list[int]:
    full, rest = divmod(n_steps, per_round)
    return [per_round] * full + ([rest] if rest else [])


def timed_cells(sc: Scenario) -> list[Cell]:
    """The scenario's cells, then the A/A arm: a second cell of each reference-variant cell."""
    part = registry.world(sc.world).part(ResultsPart)
    reference = part.vocabulary.reference if part is not None else None
    ours = cells(sc)
    twins = [dataclasses.replace(c, arm=AA_ARM) for c in ours if c.variant == reference]
    return ours + twins


def run_time_pass(
    sc: Scenario,
    device: torch.device,
    device_kind: str,
    builder: WorldBuilder = build_scenario_world,
    show_progress: bool | None = None,
) -> PassRows:
    timed = [_TimedCell(sc, cell, device_kind) for cell in timed_cells(sc)]
    total = sum(tc.total for tc in timed)
    rng = random.Random(sc.seed)
    with Progress(total, f"{sc.name} time", show_progress) as prog:
        for tc in timed:
            prog.describe(f"{sc.name} time set-up {tc.cell.label()}")
            tc.set_up(builder, device, prog)
        if device_kind == "cuda":
            torch.cuda.synchronize()
        sizes = _round_sizes(sc.steps.time_steps(device_kind), sc.steps.round_steps)
        with region_timer() as timer, wait_timer() as waits:
            clock = _StepClock(device_kind == "cuda", waits)
            for r, n in enumerate(sizes):
                order = [tc for tc in timed if tc.failure is None]
                rng.shuffle(order)
                prog.describe(f"{sc.name} time round {r + 1}/{len(sizes)}")
                for tc in order:
                    tc.run_round(n, r, clock, timer, prog)
    out = PassRows()
    for tc in timed:
        out.extend(tc.finish())
    return out
