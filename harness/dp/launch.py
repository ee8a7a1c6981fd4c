"""`bench` of a DP scenario: under torchrun this process is one rank; otherwise it starts every
rank on this host with torch's elastic launcher (what ``torchrun --standalone`` runs).

Either way the ranks are torch.distributed's: the launcher's rendezvous gives each process its
RANK / WORLD_SIZE / LOCAL_RANK, and the job initializes its process groups from them, so the
same command runs across hosts under ``torchrun --nnodes N --node-rank i --rdzv-endpoint ...``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path

from harness.dp.cells import dp_cells, rank_cell
from harness.dp.job import (
    RankJob,
    RankResult,
    check_gpus,
    launched_by_torch,
    rank_env,
    run_rank,
)
from harness.dp.section import dp_of
from harness.errors import (
    CheckFailed,
    InputError,
    Interrupted,
    OperationalError,
    stop_reason,
    stop_signal,
)
from harness.results.files import check_writable
from harness.results.run_folder import RunFolder, is_complete, new_run_id
from harness.runner.bench import chosen_pass
from harness.runner.cells import Footprint
from harness.runner.device import device_kind
from harness.runner.preflight import (
    PROCESS_BYTES,
    cell_footprints,
    check_memory,
    combined,
    usable_cores,
)
from harness.scenario import LoadedScenario
from harness.scenario.loader import display_path

# by name: importing it makes the importer die with its parent, which only the server should
FORK_SERVER = "harness.dp.fork_server"


def run_dp_bench(loaded: LoadedScenario, device: str, asked: str | None, out_root: Path) -> int:
    """Run the scenario's ranks; exit 0 when rank 0 wrote a complete run folder (1 otherwise,
    with the reason; the folder stays marked incomplete)."""
    kind = device_kind(device)
    which, why = chosen_pass(loaded, kind, asked)
    if why:
        print(why, file=sys.stderr)
    job = RankJob(loaded, device, which, out_root, new_run_id())
    per_rank = rank_footprints(loaded)
    if launched_by_torch():
        if rank_env().rank == 0:
            check_writable(out_root, "--out")
        result = run_rank(job)
    else:
        if kind == "cuda":
            check_gpus(dp_of(loaded.scenario).ranks, "dp.ranks")
        check_local_ranks(loaded, per_rank, kind)
        check_writable(out_root, "--out")  # after every input check, before any rank starts
        ranks = dp_of(loaded.scenario).ranks
        print(f"scenario {loaded.name}: starting {ranks} ranks on this host", file=sys.stderr)
        result = launch_local(job)
    if result is not None and not result.complete:
        if result.operational:
            raise OperationalError(f"{result.reason}; run folder left incomplete: {result.folder}")
        raise CheckFailed(f"run folder {result.folder} is incomplete: {result.reason}")
    return 0


def rank_footprints(loaded: LoadedScenario) -> list[Footprint]:
    """What each rank's worlds need (one cell after another), after every rank's view of every
    cell passed its world's checks (InputError)."""
    sc, file = loaded.scenario, display_path(loaded.path)
    return [
        combined(
            cell_footprints(sc, file, [rank_cell(sc, cell, r) for cell in dp_cells(sc)]),
            at_once=False,
        )
        for r in range(dp_of(sc).ranks)
    ]


def check_local_ranks(loaded: LoadedScenario, per_rank: list[Footprint], kind: str) -> None:
    """Every rank on this host is a process of its own, with its own worlds: refuse more of
    them than the host has cores (on the emulated device) or free memory for."""
    file, ranks = display_path(loaded.path), len(per_rank)
    cores = usable_cores()
    if kind == "emu" and ranks > cores:
        raise InputError(
            f"{ranks} ranks on this host need {ranks} CPU cores (each rank is a process that "
            f"runs its own serving world), found {cores}",
            file=file,
            key="dp.ranks",
        )
    need = combined(per_rank, at_once=True)
    device = need.device_bytes if kind == "emu" else max(fp.device_bytes for fp in per_rank)
    what = f"{ranks} rank processes and their worlds"
    host = need.host_bytes + ranks * PROCESS_BYTES
    check_memory(host, device, ("dp.ranks", *need.keys), kind, file, what)


def launch_local(job: RankJob) -> RankResult:
    """Every rank on this host, through torch's elastic launcher; rank 0's result. A rank that
    fails stops the others (the launcher's rule); rank 0 still writes what it has.

    Each rank is a fork of one server process (multiprocessing's forkserver) that imported the
    ranks' code when this process first launched ranks (harness.dp.fork_server), instead of a
    fresh interpreter importing torch again (about 2 s of CPU a rank). The server touches no
    device, so each rank opens its own. It lives as long as this process, or the thread that
    first launched; a rank gets the environment of that first launch, with torch's rank
    variables on top."""
    import multiprocessing
    import tempfile

    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    ranks = dp_of(job.loaded.scenario).ranks
    preload = [FORK_SERVER]
    if device_kind(job.device) == "emu":
        # torch imports DTensor at the first op on any tensor subclass (its fast path for
        # DTensor), 0.7 s and more: once in the server, not again in every emulated rank
        preload.append("torch.distributed.tensor")
    multiprocessing.set_forkserver_preload(preload)
    logging.getLogger("torch.distributed.elastic").setLevel(logging.ERROR)
    folder = job.out_root / job.loaded.name / job.run_id
    job = dataclasses.replace(job, launcher_pid=os.getpid())  # each rank dies with this process
    try:
        # torch's launcher keeps the ranks' error files in a folder it never removes (by default
        # a new one in the temporary directory each launch): here they go with the launch
        with tempfile.TemporaryDirectory(prefix="harness-dp-launch-") as logs:
            config = LaunchConfig(
                min_nodes=1,
                max_nodes=1,
                nproc_per_node=ranks,
                run_id=f"harness-{job.run_id}",
                rdzv_backend="c10d",
                rdzv_endpoint="localhost:0",  # a free port: torchrun --standalone
                max_restarts=0,
                start_method="forkserver",
                logs_specs=DefaultLogsSpecs(log_dir=logs),
            )
            results = elastic_launch(config, run_rank)(job)
    except ChildFailedError as exc:
        failed = ", ".join(f"rank {rank} ({_how(f)})" for rank, f in sorted(exc.failures.items()))
        left = record_stop(folder, f"{failed} failed")
        raise CheckFailed(f"{failed} failed; {left}") from exc
    except (KeyboardInterrupt, SignalException) as exc:  # Ctrl-C, or SIGTERM to the launcher
        signum = int(exc.sigval) if isinstance(exc, SignalException) else stop_signal(exc)
        raise Interrupted(record_stop(folder, stop_reason(signum)), signum) from None
    return results[0]


def record_stop(folder: Path, reason: str) -> str:
    """After the ranks are gone (the launcher waited for them): mark the run folder with the
    launcher's reason, which only it knows (a rank sees a SIGTERM either way), and say what was
    left behind: a folder that was never made is not named."""
    if not (folder / "meta.json").is_file():
        return "stopped before the run folder was made"
    if is_complete(folder):
        return f"the run folder {folder} was complete already"
    RunFolder.reopen(folder).abandon(reason)
    return f"run folder left incomplete: {folder}"


def _how(failure: object) -> str:
    code = getattr(failure, "exitcode", None)
    signal_name = failure.signal_name() if code is not None and code < 0 else None
    return f"signal {signal_name}" if signal_name else f"exit code {code}"
