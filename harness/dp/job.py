"""One rank's run of a DP scenario; rank 0 gathers every rank's rows and writes the run folder.

The rank comes from torch.distributed's launcher environment (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR/PORT): torchrun on every host, or harness.dp.launch on this one.
Each rank runs every DP cell's count pass, then every cell's time pass, in the same order as
the others, on its own device (``cuda:<local rank>``, or the emulated device).

Nothing waits forever: the exchanges run in groups whose collectives time out after
``dp.timeout_s``, and the default group (set-up and the final gather) after twice that, so a
rank that waits for a peer that failed gives up before the gather times out. A cell that
fails on any rank ends the run on every rank (their collectives could no longer be matched):
the failing rank stops, the others time out in the exchange and stop. A rank that dies makes
its peers' collectives fail at once (its connections close). Either way rank 0 writes what it
has: every rank's rows it could gather, an outcome row for every (rank, pass, cell) that did not
run, and the run stays marked incomplete.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from harness.dp.backends import EXCHANGE_BACKENDS
from harness.dp.cells import (
    DPSite,
    DPWorldBuilder,
    build_dp_world,
    capture_sizes,
    dp_cells,
    rank_cell,
    rank_stream,
)
from harness.dp.exchange import MLPSyncExchange
from harness.dp.lifeline import die_with_parent
from harness.dp.section import dp_of
from harness.dp.timing import run_dp_cell_time
from harness.errors import InputError, Interrupted, os_error_text
from harness.results.run_folder import RunFolder
from harness.results.summary import format_summary
from harness.results.tables import COLUMNS
from harness.runner.bench import STATUS, TABLES, failure_text, run_meta
from harness.runner.cells import Cell
from harness.runner.count_pass import PassRows, run_count_pass
from harness.runner.device import DeviceHandle, open_device
from harness.runner.rows import failure_info
from harness.scenario import LoadedScenario, Scenario

PASS_ORDER = {"count": ("count",), "time": ("time",), "both": ("count", "time")}


@dataclass(frozen=True)
class RankJob:
    """What every rank runs (picklable: the launcher sends it to each rank's process)."""

    loaded: LoadedScenario
    device: str  # auto | cuda | emu
    which: str  # count | time | both
    out_root: Path
    run_id: str
    builder: DPWorldBuilder = build_dp_world
    launcher_pid: int | None = None  # harness.dp.launch on this host; None under torchrun


@dataclass(frozen=True)
class RankEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


def rank_env() -> RankEnv:
    """This process's place among the ranks, from the launcher's environment."""
    env = os.environ
    world_size = int(env["WORLD_SIZE"])
    return RankEnv(
        rank=int(env["RANK"]),
        world_size=world_size,
        local_rank=int(env["LOCAL_RANK"]),
        local_world_size=int(env.get("LOCAL_WORLD_SIZE", world_size)),
    )


# What torch's elastic agent (torchrun's) sets in every process it starts, beside the rank
# variables: those alone are what a SLURM or torchrun shell leaves behind for its children.
AGENT_VARIABLE = "TORCHELASTIC_RUN_ID"


def launched_by_torch() -> bool:
    """Whether torchrun (torch's elastic agent) started this process as one rank. Stray rank
    variables without the agent's are ignored: this process then starts the ranks itself."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", AGENT_VARIABLE))


def check_gpus(ranks_here: int, what: str) -> None:
    """Every rank on this host needs a GPU of its own."""
    found = torch.cuda.device_count()
    if found < ranks_here:
        raise InputError(
            f"{ranks_here} ranks on this host need {ranks_here} GPUs, found {found} (ranks "
            "sharing a GPU are not DP attention's topology); use --device emu for a CPU run",
            key=what,
        )


@dataclass(frozen=True)
class RankResult:
    """What rank 0 reports back: the run folder, and whether every rank ran every cell."""

    folder: Path
    complete: bool
    reason: str | None
    operational: bool = False  # the environment stopped it (a full disk): exit 3, not 1


class RankStopped(Exception):
    """SIGTERM stopped this rank: the launcher's, because a peer failed or because it was
    stopped itself (it records which in the run folder: only it knows), or the user's."""


class _Sigterm:
    """The launcher's SIGTERM: while cells run it raises RankStopped in them (the cell's
    outcome says so); once the rank gathers and writes it only notes it (a gather blocks in C++
    where no handler runs; the launcher kills the process 30 s after its SIGTERM). When the rank
    is done the signal takes effect again: at once if it came (the launcher waits for the
    process to end, not for its result)."""

    def __init__(self) -> None:
        self.received = threading.Event()
        self.raising = True

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def release(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if self.received.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    def _handle(self, signum: int, frame: object) -> None:
        first = not self.received.is_set()
        self.received.set()
        if first and self.raising:
            raise RankStopped("stopped by SIGTERM")


LAUNCHER_STOP = _Sigterm()


def run_rank(job: RankJob) -> RankResult | None:
    """This process's rank of the run; rank 0 returns the run folder, the others None."""
    die_with_parent(job.launcher_pid)
    env = rank_env()
    dp = dp_of(job.loaded.scenario)
    if env.world_size != dp.ranks:
        raise InputError(
            f"{dp.ranks} ranks, but the launcher started {env.world_size}", key="dp.ranks"
        )
    LAUNCHER_STOP.install()
    with open_device(job.device) as dh:
        if dh.kind == "cuda":
            check_gpus(env.local_world_size, "--device")
            torch.cuda.set_device(env.local_rank)
            dh = DeviceHandle("cuda", torch.device("cuda", env.local_rank), dh.name)
        # NVLink multicast stays off unless the environment says otherwise
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        timeout = dt.timedelta(seconds=dp.timeout_s)
        dist.init_process_group("gloo", timeout=2 * timeout)
        try:
            return _run(job, env, dh, timeout)
        finally:
            dist.destroy_process_group()
            LAUNCHER_STOP.release()


def _run(job: RankJob, env: RankEnv, dh: DeviceHandle, timeout: dt.timedelta) -> RankResult | None:
    exchanges = make_exchanges(job.loaded.scenario, dh, timeout)
    folder = _create_folder(job, dh) if env.rank == 0 else None
    try:
        return _run_cells_and_write(job, env, dh, exchanges, folder)
    except KeyboardInterrupt:  # Ctrl-C reaches every rank of this host
        if folder is None:
            raise
        folder.abandon("interrupted (Ctrl-C)")
        raise Interrupted(f"run folder left incomplete: {folder.path}") from None
    except OSError as exc:  # rank 0 writing (a full disk, a file-size limit): said by the launcher
        if folder is None:
            raise
        reason = os_error_text(exc)
        folder.abandon(reason)
        return RankResult(folder.path, False, reason, operational=True)


def _run_cells_and_write(
    job: RankJob,
    env: RankEnv,
    dh: DeviceHandle,
    exchanges: dict[str, MLPSyncExchange],
    folder: RunFolder | None,
) -> RankResult | None:
    sc = job.loaded.scenario
    t0 = time.perf_counter()
    rows, stopped = run_cells(job, dh, exchanges, env.rank)
    LAUNCHER_STOP.raising = False  # from here on: gather and write what there is
    me = {"rank": env.rank, "host": socket.gethostname(), "device": str(dh.device), "name": dh.name}
    payloads, lost = gather_rows(rows, me, stopped, env)
    if folder is None:
        return None
    passes = PASS_ORDER[job.which]
    result = write_run(folder, sc, passes, payloads, lost, time.perf_counter() - t0)
    if result.complete:
        print(format_summary(result.folder))
    state = "" if result.complete else f" INCOMPLETE (see outcomes.csv): {result.reason}"
    print(f"\nrun folder: {result.folder} (device {dh.kind}, {env.world_size} ranks){state}")
    return result


def make_exchanges(
    sc: Scenario, dh: DeviceHandle, timeout: dt.timedelta
) -> dict[str, MLPSyncExchange]:
    """One group per exchange backend the cells use, made by every rank in the same order.
    Without a GPU the NCCL variant's group is a gloo one (device values travel as host ones)."""
    dp = dp_of(sc)
    out = {}
    for name in dp.backend:
        backend = EXCHANGE_BACKENDS[name]
        group_backend = backend.gpu_group if dh.kind == "cuda" else "gloo"
        group = dist.new_group(backend=group_backend, timeout=timeout)
        out[name] = MLPSyncExchange(backend, group, dh.device, dp.ranks)
    return out


# one pass of one rank's cell: the scenario, the rank's cell, the device, the cell's builder
PassFn = Callable[[Scenario, Cell, DeviceHandle, Any], PassRows]
PASSES: dict[str, PassFn] = {
    "count": lambda sc, cell, dh, builder: run_count_pass(
        sc, dh.device, builder, False, only=[cell]
    ),
    "time": lambda sc, cell, dh, builder: run_dp_cell_time(sc, cell, dh.device, dh.kind, builder),
}


def run_cells(
    job: RankJob, dh: DeviceHandle, exchanges: dict[str, MLPSyncExchange], rank: int
) -> tuple[PassRows, str | None]:
    """Every pass of every cell on this rank, until one fails; returns the rows and why the
    rank stopped early (None: it ran everything)."""
    sc = job.loaded.scenario
    capture = capture_sizes(sc)
    rows = PassRows()
    for pass_name in PASS_ORDER[job.which]:
        for cell in dp_cells(sc):
            site = DPSite(rank, cell, exchanges[cell.backend], capture, dp_of(sc).inject)
            builder = functools.partial(job.builder, site=site)
            where = f"{sc.name}/{cell.label}, {pass_name} pass, rank {rank}"
            mine = rank_cell(sc, cell, rank)
            try:
                got = PASSES[pass_name](sc, mine, dh, builder)
            except RankStopped as exc:  # outside the cell's own handling of failures
                rows.outcomes.append(stopped_row(sc, mine, pass_name, exc))
                return rows, f"{where}: {exc}"
            rows.extend(got)
            failed = [o for o in got.outcomes if o[STATUS] != "ok"]
            if failed:
                return rows, f"{where}: {failure_text(failed[0])}"
            if LAUNCHER_STOP.received.is_set():
                return rows, f"{where}: stopped by SIGTERM"
    return rows, None


def stopped_row(sc: Scenario, cell: Cell, pass_name: str, exc: RankStopped) -> tuple:
    """The outcome of a cell the launcher stopped (rank column 0, as the cell's own rows)."""
    return (*cell.key(sc.name), pass_name, "error", None, 0, *failure_info(exc), 0.0)


@dataclass
class Payload:
    """One rank's contribution to the run folder."""

    rank: int
    rows: PassRows
    info: dict[str, Any]
    stopped: str | None


def gather_rows(
    rows: PassRows, info: dict[str, Any], stopped: str | None, env: RankEnv
) -> tuple[dict[int, Payload], str | None]:
    """Every rank's rows on rank 0 (torch.distributed.gather_object on the default group);
    returns the payloads by rank (empty elsewhere) and why some are missing."""
    mine = Payload(env.rank, rows, info, stopped)
    if (
        LAUNCHER_STOP.received.is_set()
    ):  # the launcher is shutting every rank down: keep what this rank has
        return ({env.rank: mine} if env.rank == 0 else {}), "stopped by SIGTERM"
    got: list[Any] | None = [None] * env.world_size if env.rank == 0 else None
    try:
        dist.gather_object(mine, got, dst=0)
    except Exception as exc:  # a rank died or stopped answering: no gather with it
        first = str(exc).splitlines()[0] if str(exc) else ""
        return ({env.rank: mine} if env.rank == 0 else {}), f"{type(exc).__name__}: {first}"
    return {p.rank: p for p in got or [] if p is not None}, None


def _create_folder(job: RankJob, dh: DeviceHandle) -> RunFolder:
    sc = job.loaded.scenario
    cells = len(dp_cells(sc)) * dp_of(sc).ranks
    meta = run_meta(job.loaded, dh, job.which, job.run_id, cells=cells, dp=dp_meta(sc))
    return RunFolder.create(job.out_root, sc.name, job.run_id, meta)


def dp_meta(sc: Scenario) -> dict[str, Any]:
    """What the report needs to read a DP run: each cell label's axes, each rank's stream."""
    dp = dp_of(sc)
    return {
        "ranks": dp.ranks,
        "timeout_s": dp.timeout_s,
        "cells": {c.label: c.describe() for c in dp_cells(sc)},
        "inject": None if dp.inject is None else dataclasses.asdict(dp.inject),
        "streams": [dataclasses.asdict(rank_stream(sc, r)) for r in range(dp.ranks)],
    }


def write_run(
    folder: RunFolder,
    sc: Scenario,
    passes: tuple[str, ...],
    payloads: dict[int, Payload],
    lost: str | None,
    wall_s: float,
) -> RankResult:
    """Rank 0: every rank's rows with its rank, a row for what did not run, then the verdict."""
    rows = PassRows()
    for rank in sorted(payloads):
        rows.extend(with_rank(payloads[rank].rows, rank))
    stopped = [p.stopped for p in payloads.values() if p.stopped]
    reason = "; ".join(stopped + ([f"rows of some ranks are missing ({lost})"] if lost else []))
    rows.outcomes.extend(not_run_rows(sc, passes, rows, set(payloads), reason))
    written = rows.with_process(0)  # one process per rank: no repeats
    for table in TABLES:
        folder.write_table(table, getattr(written, table))
    folder.write_json("stacks.json", rows.stacks)
    folder.meta["dp"]["ranks_seen"] = [payloads[r].info for r in sorted(payloads)]
    if reason:
        folder.abandon(reason)
    else:
        folder.finish(wall_s=round(wall_s, 3), failed_cells=0)
    return RankResult(folder.path, not reason, reason or None)


def with_rank(rows: PassRows, rank: int) -> PassRows:
    """The rows with their ``rank`` column set (ranks record 0, as a single rank does)."""
    out = PassRows(stacks=dict(rows.stacks))
    for table in TABLES:
        i = COLUMNS[table].index("rank")
        getattr(out, table).extend((*r[:i], rank, *r[i + 1 :]) for r in getattr(rows, table))
    return out


def not_run_rows(
    sc: Scenario, passes: tuple[str, ...], rows: PassRows, ranks_heard: set[int], reason: str
) -> list[tuple]:
    """An outcome row for every (rank, pass, cell) without one: "lost" for a rank whose rows
    never reached rank 0 (it died or stopped answering), "not_run" for cells a rank did not
    reach because the run stopped."""
    cols = COLUMNS["outcomes"]
    seen = {
        (o[cols.index("case")], o[cols.index("rank")], o[cols.index("pass")]) for o in rows.outcomes
    }
    out = []
    for rank in range(dp_of(sc).ranks):
        status = "not_run" if rank in ranks_heard else "lost"
        for pass_name in passes:
            for cell in dp_cells(sc):
                if (cell.label, rank, pass_name) not in seen:
                    key = rank_cell(sc, cell, rank).key(sc.name, rank)
                    out.append((*key, pass_name, status, "", 0, "", reason, "", "", 0.0))
    return out
