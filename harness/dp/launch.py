"""`bench` of a DP scenario: under torchrun this process is one rank; otherwise it starts every
rank on this host with torch's elastic launcher (what ``torchrun --standalone`` runs).

Either way the ranks are torch.distributed's: the launcher's rendezvous gives each process its
RANK / WORLD_SIZE / LOCAL_RANK, and the job initializes its process groups from them, so the
same command runs across hosts under ``torchrun --nnodes N --node-rank i --rdzv-endpoint ...``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from harness.dp.job import (
    RankJob,
    RankResult,
    check_gpus,
    launched_by_torch,
    rank_env,
    run_rank,
)
from harness.errors import CheckFailed, Interrupted
from harness.results.files import check_writable
from harness.results.run_folder import new_run_id
from harness.runner.bench import chosen_pass
from harness.runner.device import device_kind
from harness.scenario import LoadedScenario


def run_dp_bench(loaded: LoadedScenario, device: str, asked: str | None, out_root: Path) -> int:
    """Run the scenario's ranks; exit 0 when rank 0 wrote a complete run folder (1 otherwise,
    with the reason; the folder stays marked incomplete)."""
    kind = device_kind(device)
    which, why = chosen_pass(loaded, kind, asked)
    if why:
        print(why, file=sys.stderr)
    job = RankJob(loaded, device, which, out_root, new_run_id())
    if launched_by_torch():
        if rank_env().rank == 0:
            check_writable(out_root, "--out")
        result = run_rank(job)
    else:
        if kind == "cuda":
            check_gpus(loaded.scenario.dp.ranks, "dp.ranks")
        check_writable(out_root, "--out")  # after every input check, before any rank starts
        ranks = loaded.scenario.dp.ranks
        print(f"scenario {loaded.name}: starting {ranks} ranks on this host", file=sys.stderr)
        result = launch_local(job)
    if result is not None and not result.complete:
        raise CheckFailed(f"run folder {result.folder} is incomplete: {result.reason}")
    return 0


def launch_local(job: RankJob) -> RankResult:
    """Every rank on this host, through torch's elastic launcher; rank 0's result. A rank that
    fails stops the others (the launcher's rule); rank 0 still writes what it has."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    ranks = job.loaded.scenario.dp.ranks
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=ranks,
        run_id=f"harness-{job.run_id}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",  # a free port: torchrun --standalone
        max_restarts=0,
        start_method="spawn",
    )
    logging.getLogger("torch.distributed.elastic").setLevel(logging.ERROR)
    folder = job.out_root / job.loaded.name / job.run_id
    try:
        results = elastic_launch(config, run_rank)(job)
    except ChildFailedError as exc:
        failed = ", ".join(f"rank {rank} ({_how(f)})" for rank, f in sorted(exc.failures.items()))
        raise CheckFailed(f"{failed} failed; the run folder {folder} is incomplete") from exc
    except (KeyboardInterrupt, SignalException):  # Ctrl-C reaches every rank and the launcher
        raise Interrupted(f"run folder left incomplete: {folder}") from None
    return results[0]


def _how(failure: object) -> str:
    code = getattr(failure, "exitcode", None)
    signal_name = failure.signal_name() if code is not None and code < 0 else None
    return f"signal {signal_name}" if signal_name else f"exit code {code}"
