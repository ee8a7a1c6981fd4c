"""The time pass: no ledger, regions only; raw samples, statistics later.

Per measured scheduler step:
- host time of every region exit (`harness.sync.region_timer`, perf_counter_ns), metric "host";
- the whole iteration (region "iteration"): host time of `world.step()` (metric "host"); on
  CUDA also the device time between events recorded before and after it (metric "device") and
  the end-to-end time, from the iteration's start on the host until the GPU finished its work
  (metric "e2e"; a sync's pipeline bubble shows here, with the stand-in forward keeping the GPU
  busy).
On the emulated device only host times exist; their rows say device "emu".
Set-up (`warmup_and_capture`, step -1, path "capture", region "warmup_and_capture") and the
warm-up steps (path "warmup", region "iteration") get host-time rows too, apart from the
measured ones.
"""

from __future__ import annotations

import time

import torch

from harness.results.tables import NO_TAG
from harness.runner.cells import (
    Cell,
    WorldBuilder,
    build_serving_world,
    cells,
    effective_mirror,
    failure_info,
    finding_row_parts,
)
from harness.runner.count_pass import SETUP_STEP, PassRows, _tag
from harness.runner.progress import Progress
from harness.scenario import Scenario
from harness.sync import region_timer, set_step

ITERATION_REGION = "iteration"
SETUP_REGION = "warmup_and_capture"


def run_cell_time(
    sc: Scenario,
    cell: Cell,
    device: torch.device,
    device_kind: str,
    builder: WorldBuilder = build_serving_world,
    progress: Progress | None = None,
) -> PassRows:
    rows = PassRows()
    cell_key = (sc.name, cell.variant, cell.mirror, cell.batch_size, 0)
    on_cuda = device_kind == "cuda"
    t_cell = time.perf_counter()
    world = None
    done = 0
    status, exc_info = "ok", ("", "", "", "")
    n_time = sc.steps.time_steps(device_kind)
    total = sc.steps.warmup + n_time
    try:
        world = builder(sc, cell, device)
        # warm-up and capture are recorded apart: path "capture" / "warmup", never measured
        t0 = time.perf_counter_ns()
        world.warmup_and_capture()
        setup_us = (time.perf_counter_ns() - t0) / 1e3
        rows.latency.append(
            (
                *cell_key,
                SETUP_STEP,
                NO_TAG,
                "capture",
                SETUP_REGION,
                device_kind,
                "host",
                setup_us,
                "us",
                0.0,
            )
        )
        for i in range(sc.steps.warmup):
            set_step(i)
            t0 = time.perf_counter_ns()
            world.step()
            warm_us = (time.perf_counter_ns() - t0) / 1e3
            it = (*cell_key, i, NO_TAG, "warmup", ITERATION_REGION)
            rows.latency.append((*it, device_kind, "host", warm_us, "us", 0.0))
            done += 1
            if progress is not None:
                progress.advance()
        if on_cuda:
            torch.cuda.synchronize()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        with region_timer() as rt:
            for j in range(n_time):
                step = sc.steps.warmup + j
                set_step(step)
                s0 = len(rt.samples)
                t0 = time.perf_counter_ns()
                if on_cuda:
                    ev0, ev1 = starts[j % 2], ends[j % 2]
                    ev0.record()
                world.step()
                t1 = time.perf_counter_ns()
                if on_cuda:
                    ev1.record()
                    # the server reads each step's result back; waiting here is that read
                    ev1.synchronize()
                    t2 = time.perf_counter_ns()
                samples = rt.samples[s0:]
                paths = {_tag(tags, "path") for _r, _s, tags, _a, _b in samples}
                # outside a forward pass (scheduler regions, the iteration): the step's path
                step_path = "eager" if "eager" in paths else "graph" if "graph" in paths else "none"
                for region, _step, tags, a, b in samples:
                    path = _tag(tags, "path") or step_path
                    key = (*cell_key, step, _tag(tags, "forward_mode"), path, region)
                    start_us = (a - t0) / 1e3  # where the region began inside its step
                    rows.latency.append((*key, device_kind, "host", (b - a) / 1e3, "us", start_us))
                it = (*cell_key, step, NO_TAG, step_path, ITERATION_REGION)
                rows.latency.append((*it, device_kind, "host", (t1 - t0) / 1e3, "us", 0.0))
                if on_cuda:
                    rows.latency.append(
                        (*it, device_kind, "device", ev0.elapsed_time(ev1) * 1e3, "us", 0.0)
                    )
                    rows.latency.append((*it, device_kind, "e2e", (t2 - t0) / 1e3, "us", 0.0))
                done += 1
                if progress is not None:
                    progress.advance()
            del rt.samples[:]  # raw samples live in rows now
    except Exception as exc:  # a failing cell is a result, not the end of the run
        status, exc_info = "error", failure_info(exc)
        if progress is not None:
            progress.skip(total - done)
    finally:
        set_step(None)
    mirror_eff = effective_mirror(world)
    elapsed = round(time.perf_counter() - t_cell, 3)
    rows.outcomes.append((*cell_key, "time", status, mirror_eff, done, *exc_info, elapsed))
    for f in getattr(world, "findings", None) or []:
        step, forward_mode, path, kind, detail = finding_row_parts(f)
        rows.findings.append((*cell_key, "time", step, forward_mode, path, kind, detail))
    return rows


def run_time_pass(
    sc: Scenario,
    device: torch.device,
    device_kind: str,
    builder: WorldBuilder = build_serving_world,
    show_progress: bool | None = None,
) -> PassRows:
    out = PassRows()
    todo = cells(sc)
    total = len(todo) * (sc.steps.warmup + sc.steps.time_steps(device_kind))
    with Progress(total, f"{sc.name} time", show_progress) as prog:
        for cell in todo:
            prog.describe(f"{sc.name} time {cell.label()}")
            out.extend(run_cell_time(sc, cell, device, device_kind, builder, prog))
    return out
