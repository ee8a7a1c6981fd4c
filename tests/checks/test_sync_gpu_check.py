"""The ledger's GPU check: what it does without a GPU (refuse, or a smoke run on the emulated
device), and the logic it uses on one that needs no GPU to test."""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.checks import emulated_cost, record_cost, sync_gpu, sync_oracle, sync_overhead
from harness.cli import main
from syncledger import SyncLedger, cupti
from syncledger.catalogue import CASES
from tests.support.sync_fakes import FakeCupti, use_fake_cupti

REPO = Path(__file__).resolve().parents[2]
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")


@no_gpu
def test_cuda_check_without_cuda_refuses_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sync"
    assert main(["check", "sync", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["sync_gpu: no CUDA device on this machine; nothing was run or written"]
    assert not out.exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="nvidia-smi is present")
def test_make_gpu_check_without_a_gpu_refuses_at_once(tmp_path: Path) -> None:
    gpu_out = tmp_path / "gpu"
    # a top-level make, as a user runs it (not a sub-make of `make test`)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    res = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "gpu-check",
            f"PYTHON={sys.executable}",
            f"GPU_OUT={gpu_out}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "gpu-check needs an NVIDIA GPU" in lines[0]
    assert not gpu_out.exists()


def test_emulated_smoke_run_writes_every_table(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    small_metadata_steps: None,
) -> None:
    costs = functools.partial(sync_overhead.enter_exit_costs, n=1_000)
    monkeypatch.setattr(sync_overhead, "enter_exit_costs", costs)
    probes = functools.partial(record_cost.probe_rows, calls=10, rounds=2)
    monkeypatch.setattr(record_cost, "probe_rows", probes)
    out = tmp_path / "sync"
    assert main(["check", "sync", "--out", str(out), "--device", "emu", "--steps", "12"]) == 0
    with (out / "catalogue.csv").open() as f:
        cat = list(csv.DictReader(f))
    assert [r["case"] for r in cat] == [c.name for c in CASES]
    assert all(r["ok"] == "True" and r["emulated_ok"] == "True" for r in cat)
    with (out / "overhead.csv").open() as f:
        configs = {r["config"] for r in csv.DictReader(f)}
    assert {"plain", "regions", "ledger_across_steps", "max_syncs_per_step"} <= configs
    assert {"region_enter_exit", "ledger_open_close", *emulated_cost.CONFIGS} <= configs
    with (out / "record_cost.csv").open() as f:
        probed = {(r["device"], r["probe"], r["arm"]) for r in csv.DictReader(f)}
    assert probed == {("emu", p.name, a) for p in record_cost.PROBES for a in ("plain", "ledger")}
    meta = json.loads((out / "meta.json").read_text())
    assert meta["device_kind"] == "emu" and "nvtx_backend" in meta
    assert isinstance(meta["cupti_status_overhead"], str)
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
    text = capsys.readouterr().out
    assert text.rstrip().splitlines()[-1] == "result: ok"
    assert "max_syncs_per_step" in text and "target <= 1.08x" in text
    assert "item under ledger on emu" in text


def test_staging_threshold_bisects_to_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    true_threshold = (2 << 20) + 3 * sync_oracle.PAGE

    def fake(nbytes: int, sleeper: object) -> sync_oracle.Verdict:
        waits = int(nbytes > true_threshold)
        return sync_oracle.Verdict(waits, float(waits), 0.0)

    monkeypatch.setattr(sync_oracle, "pageable_h2d_waits", fake)
    measured, tried = sync_oracle.staging_threshold(sync_oracle.Sleeper(1, 1.0))
    assert measured == true_threshold
    assert {n for n, _ in tried} >= set(sync_oracle.SIZES)


def test_overhead_targets_are_ratios_to_the_plain_step() -> None:
    def rows(config: str, values: list[int]) -> list[dict[str, object]]:
        return [{"config": config, "value": v} for v in values]

    data = (
        rows("plain", [100, 100, 100])
        + rows("ledger_across_steps", [104, 104, 120])
        + rows("max_syncs_per_step", [130, 130, 90])
        + rows("region_enter_exit", [1200, 1200, 800])
    )
    got = {t.config: (round(v, 2), met) for t, v, met in sync_overhead.target_verdicts(data)}
    assert got == {
        "ledger_across_steps": (1.04, True),
        "max_syncs_per_step": (1.3, False),
        "region_enter_exit": (1200.0, False),
    }


def test_cuptis_share_names_the_state_it_was_timed_in(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a profiler that ran after the host configurations leaves CUPTI unsubscribable
    monkeypatch.setattr(cupti, "_status", "could not subscribe (another subscriber)")
    rows = [
        {"config": c, "value": v}
        for c, v in (("plain", 100), ("ledger_across_steps", 110), ("ledger_without_cupti", 100))
    ]
    sync_gpu._print_overhead(rows, "attached: driver-API callbacks on 9 synchronizing calls")
    line = next(s for s in capsys.readouterr().out.splitlines() if "own share" in s)
    assert line.strip() == (
        "the CUPTI detector's own share: 1.10x "
        "(attached: driver-API callbacks on 9 synchronizing calls)"
    )


class _NoSleeper:
    ms = 1.0

    def queue(self, stream: object) -> None:
        return None


def test_the_oracle_times_with_cupti_detached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attached, CUPTI's callbacks between a copy to the host and its stream synchronize let the
    oracle's next sleep in between them: one wait more than the program makes."""
    fake = FakeCupti()
    use_fake_cupti(monkeypatch, fake)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    assert cupti.attach()
    seen: list[bool] = []
    sync_oracle.count_waits(lambda: lambda: seen.append(cupti.attached()), _NoSleeper(), 2)
    assert seen == [False] * 4  # idle and behind the sleeps, each repeat
    assert cupti.attached() and fake.unsubscribed == 1  # subscribed again afterwards


@pytest.mark.gpu
def test_oracle_reads_one_wait_for_tolist_with_cupti_attached() -> None:
    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    with SyncLedger():  # the first ledger on CUDA attaches CUPTI where it can
        x.sum().item()
    if not cupti.attached():
        pytest.skip(f"CUPTI: {cupti.status()}")
    verdict = sync_oracle.count_waits(lambda: x.tolist, sync_oracle.Sleeper.calibrated())
    assert verdict.waits == 1, verdict
    assert cupti.attached()


@pytest.mark.gpu
def test_oracle_counts_known_waits() -> None:
    sleeper = sync_oracle.Sleeper.calibrated(20.0)
    x = torch.arange(8, device="cuda")
    assert sync_oracle.count_waits(lambda: lambda: x.sum().item(), sleeper).waits == 1
    assert sync_oracle.count_waits(lambda: lambda: x.repeat_interleave(x), sleeper).waits == 2
    assert sync_oracle.count_waits(lambda: lambda: x.cumsum(0), sleeper).waits == 0
