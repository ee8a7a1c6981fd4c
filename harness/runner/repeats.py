"""`--repeats N`: the passes in N fresh worker processes, one after another.

A process is the unit of replication: a fresh interpreter (spawned, not forked) has fresh
allocations, builds fresh worlds and captures fresh graphs, and its median step time moves more
from one process to the next than its steps move inside it. Each worker builds its worlds,
captures, warms up and runs every cell interleaved, as a run of one process does; the first
also runs the count pass (counts are deterministic: one is enough). The workers run one at a
time (they would compete for the device) and hand their rows back; the parent writes them,
each with its `process`, into one run folder.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from harness.errors import CheckFailed
from harness.runner.cells import WorldBuilder
from harness.runner.count_pass import PassRows, run_count_pass
from harness.runner.device import DeviceHandle, open_device
from harness.runner.time_pass import run_time_pass
from harness.scenario import LoadedScenario


@dataclass(frozen=True)
class ProcessJob:
    """What one worker process runs: the scenario, the device kind, its passes."""

    loaded: LoadedScenario
    device_kind: str
    passes: tuple[str, ...]  # "count" and / or "time", in that order
    builder: WorldBuilder
    show_progress: bool | None = None
    aa_every: bool = False  # an A/A twin of every cell, not of the reference's only


class WorkerDied(CheckFailed):
    """A worker process ended without handing its rows back (killed, out of memory, a crash)."""


def pass_rows(job: ProcessJob, dh: DeviceHandle) -> PassRows:
    """The job's passes in this process, on the open device `dh`."""
    sc = job.loaded.scenario
    rows = PassRows()
    if "count" in job.passes:
        rows.extend(run_count_pass(sc, dh.device, job.builder, job.show_progress))
    if "time" in job.passes:
        rows.extend(
            run_time_pass(sc, dh.device, dh.kind, job.builder, job.show_progress, job.aa_every)
        )
    return rows


def _worker(job: ProcessJob) -> PassRows:
    with open_device(job.device_kind) as dh:
        return pass_rows(job, dh)


def in_fresh_process(job: ProcessJob, index: int, total: int) -> PassRows:
    """The job's rows from a freshly spawned interpreter; WorkerDied when it dies."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(_worker, job).result()
        except BrokenProcessPool:
            raise WorkerDied(
                f"worker process {index} of {total} died before handing its rows back"
            ) from None


Runner = Callable[[ProcessJob, int, int], PassRows]  # how a worker's job is run (a test's own)
