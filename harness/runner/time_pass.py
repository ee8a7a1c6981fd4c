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
Traced rounds (`steps.trace` steps per cell, where a device tracer exists: CUDA with
cupti-python; harness.runner.device_trace) are spread evenly among the others: the tracer
records the device's work, and each synchronizing call gets the device idle that follows it
(harness.results.idle); each traced step also gets metrics "busy" (device busy) and "span"
(from its start to the end of its device work). Their rows say traced 1 and are kept apart from
the others: tracing costs host time at every launch.
An A/A arm: every cell of the world's reference variant (its vocabulary) gets a second,
independently built cell (column arm "aa") that runs the same steps interleaved with the
others; its Δ against the first is the run's measured noise floor.
Set-up (`warmup_and_capture`, step -1, path "capture", region "warmup_and_capture") and the
warm-up steps (path "warmup", region "iteration") get host-time rows too, apart from the
measured ones and outside any round.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from harness import registry
from harness.results.idle import step_timeline
from harness.results.tables import AA_ARM, NO_TAG
from harness.results.vocabulary import ResultsPart
from harness.runner.cells import Cell, World, WorldBuilder, build_scenario_world, cells
from harness.runner.count_pass import SETUP_STEP, PassRows
from harness.runner.device_trace import DeviceTracer, open_tracer
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
        """Run `world.step()`; returns its host start (ns), its metrics in µs and its waits
        (the device's work is done when it returns)."""
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
    traced_steps: int = 0  # steps of the traced rounds
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
        return self.sc.steps.warmup + self.sc.steps.time_steps(self.device_kind) + self.traced_steps

    def sample(
        self,
        where: tuple,
        metric: str,
        us: float,
        start_us: float = 0.0,
        round_: int | None = None,
        traced: int = 0,
    ) -> None:
        """One latency row; `where` is (step, forward_mode, path, region)."""
        row = (*self.key, *where, self.device_kind, metric, us, "us", start_us, round_, traced)
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
        self,
        n: int,
        round_: int,
        clock: _StepClock,
        timer: RegionTimer,
        progress: Progress,
        trace: _TracedRound | None = None,
    ) -> None:
        """The cell's next n measured steps, each sample marked with the round; in a traced
        round (`trace`) their rows wait for the round's device records."""
        with self._running(progress):
            for _ in range(n):
                step = self.done
                set_step(step)
                del timer.samples[:]
                offset = trace.tracer.offset_ns() if trace is not None else 0
                t0, metrics, waits = clock.run(self.world)
                end = time.perf_counter_ns()
                regions = list(timer.samples)
                if trace is None:
                    self._keep_step(step, t0, metrics, regions, round_)
                    self._keep_waits(step, t0, waits, regions)
                else:
                    trace.pending.append(
                        _TracedStep(self, step, t0, end, offset, metrics, waits, regions)
                    )
                self._advance(progress)

    def _keep_step(
        self, step: int, t0: int, metrics: dict, samples: list, round_: int, traced: int = 0
    ) -> None:
        """One row per region exit of the step, then the whole iteration's metrics."""
        path = step_path(tag_value(tags, "path") for _r, _s, tags, _a, _b in samples)
        for region, _step, tags, a, b in samples:
            where = (step, tag_value(tags, "forward_mode"), tag_value(tags, "path") or path, region)
            # start_us: where the region began inside its step
            self.sample(where, "host", (b - a) / 1e3, (a - t0) / 1e3, round_, traced)
        for metric, us in metrics.items():
            self.sample((step, NO_TAG, path, ITERATION_REGION), metric, us, 0.0, round_, traced)

    def _keep_waits(
        self,
        step: int,
        t0: int,
        waits: list[WaitSample],
        samples: list,
        idle_after_ns: tuple[int, ...] | None = None,
    ) -> None:
        """One row per synchronizing call of the step: its site, kind, the host's wait, where
        it began in the step, and (traced) the device idle after it."""
        path = step_path(tag_value(tags, "path") for _r, _s, tags, _a, _b in samples)
        traced = int(idle_after_ns is not None)
        for i, w in enumerate(waits):
            where = (step, tag_value(w.tags, "forward_mode"), tag_value(w.tags, "path") or path)
            idle = idle_after_ns[i] / 1e3 if idle_after_ns is not None else None
            call = (w.region, w.site, w.kind, w.wait_ns, (w.start_ns - t0) / 1e3, idle, traced)
            self.rows.waits.append((*self.key, *where, *call))

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


def round_plan(steps: int, traced: int, per_round: int) -> list[tuple[int, bool]]:
    """The pass's rounds: (steps per cell, whether traced), the traced rounds spread evenly
    among the others so that drift hits both alike."""
    clean, trace = _round_sizes(steps, per_round), _round_sizes(traced, per_round)
    total = len(clean) + len(trace)
    at = {int((j + 0.5) * total / len(trace)) for j in range(len(trace))}
    left, right = iter(clean), iter(trace)
    return [(next(right), True) if r in at else (next(left), False) for r in range(total)]


@dataclass
class _TracedStep:
    """A step of a traced round, waiting for the round's device records."""

    cell: _TimedCell
    step: int
    t0: int  # perf_counter_ns at its start
    end: int  # perf_counter_ns once its device work was done
    offset: int  # the tracer's clock minus perf_counter_ns, at its start
    metrics: dict[str, float]
    waits: list[WaitSample]
    regions: list


@dataclass
class _TracedRound:
    tracer: DeviceTracer
    pending: list[_TracedStep] = field(default_factory=list)

    def finish(self, round_: int) -> None:
        """Stop the tracer; each step's rows, its calls placed on the device's timeline."""
        records = sorted(self.tracer.stop())
        starts = [r[0] for r in records]
        for ts in self.pending:
            lo, hi = ts.t0 + ts.offset, ts.end + ts.offset
            began = records[: bisect.bisect_left(starts, hi)]
            work = [(a - ts.offset, b - ts.offset) for a, b in began if b > lo]
            tl = step_timeline(ts.t0, work, [(w.start_ns, w.wait_ns) for w in ts.waits])
            metrics = {**ts.metrics, "busy": tl.busy_ns / 1e3, "span": tl.span_ns / 1e3}
            ts.cell._keep_step(ts.step, ts.t0, metrics, ts.regions, round_, traced=1)
            ts.cell._keep_waits(ts.step, ts.t0, ts.waits, ts.regions, tl.idle_after_ns)


@dataclass
class _Tracing:
    """The pass's device tracer, and what to say of it in meta.json. A tracer that fails is
    dropped with the reason (the traced rounds then run no steps); the pass goes on."""

    tracer: DeviceTracer | None
    status: str

    def start(self) -> _TracedRound | None:
        if self.tracer is None:
            return None
        try:
            self.tracer.start()
        except Exception as exc:
            self._failed(exc)
            return None
        return _TracedRound(self.tracer)

    def finish(self, trace: _TracedRound, round_: int) -> None:
        try:
            trace.finish(round_)
        except Exception as exc:  # the round's steps are lost: traced, but not placed
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        self.status = f"failed, traced rounds dropped ({type(exc).__name__}: {exc})"
        self.tracer = None


def timed_cells(sc: Scenario, aa_every: bool = False) -> list[Cell]:
    """The scenario's cells, then the A/A arm: a second cell of each reference-variant cell
    (of every cell with `aa_every`)."""
    part = registry.world(sc.world).part(ResultsPart)
    reference = part.vocabulary.reference if part is not None else None
    ours = cells(sc)
    twins = [dataclasses.replace(c, arm=AA_ARM) for c in ours if aa_every or c.variant == reference]
    return ours + twins


TracerOpener = Callable[[str], tuple[DeviceTracer | None, str]]  # device kind -> tracer, status


def run_time_pass(
    sc: Scenario,
    device: torch.device,
    device_kind: str,
    builder: WorldBuilder = build_scenario_world,
    show_progress: bool | None = None,
    aa_every: bool = False,
    tracer_for: TracerOpener = open_tracer,
) -> PassRows:
    tracing = _Tracing(*tracer_for(device_kind)) if sc.steps.trace else None
    n_trace = sc.steps.trace if tracing is not None and tracing.tracer is not None else 0
    timed = [
        _TimedCell(sc, cell, device_kind, traced_steps=n_trace)
        for cell in timed_cells(sc, aa_every)
    ]
    total = sum(tc.total for tc in timed)
    rng = random.Random(sc.seed)
    with Progress(total, f"{sc.name} time", show_progress) as prog:
        for tc in timed:
            prog.describe(f"{sc.name} time set-up {tc.cell.label()}")
            tc.set_up(builder, device, prog)
        if device_kind == "cuda":
            torch.cuda.synchronize()
        plan = round_plan(sc.steps.time_steps(device_kind), n_trace, sc.steps.round_steps)
        with region_timer() as timer, wait_timer() as waits:
            clock = _StepClock(device_kind == "cuda", waits)
            for r, (n, traced) in enumerate(plan):
                order = [tc for tc in timed if tc.failure is None]
                rng.shuffle(order)
                prog.describe(f"{sc.name} time round {r + 1}/{len(plan)}")
                trace = tracing.start() if traced and tracing is not None else None
                if traced and trace is None:  # the tracer failed: its rounds run no steps
                    for tc in order:
                        tc.traced_steps -= n
                        prog.skip(n)
                    continue
                for tc in order:
                    tc.run_round(n, r, clock, timer, prog, trace)
                if trace is not None:
                    tracing.finish(trace, r)
    status = tracing.status if tracing is not None else "off (steps.trace 0)"
    out = PassRows(notes={"device_trace": status})
    for tc in timed:
        out.extend(tc.finish())
    return out
