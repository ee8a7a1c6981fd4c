"""The GPU benchmark script's CPU smoke path (Triton interpreter) and the pytest-benchmark
file's collection: both must work here so a run on a GPU does not fail on a typo. Both run
in this process (the script's main, an in-process pytest run)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_kernels_gpu_smoke(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))  # main puts the repo and benchmarks/ first
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # main sets it for --smoke
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import kernels_gpu

    argv = ["--smoke", "--out", str(tmp_path), "--samples", "2", "--batch-sizes", "2"]
    rc = kernels_gpu.main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out[-3000:]
    assert "checks:" in out and "0 failed" in out
    with (tmp_path / "kernels_samples.csv").open() as f:
        rows = list(csv.DictReader(f))
    need = {"op", "impl", "mode", "batch_size", "forward_mode", "model", "metric", "value", "unit"}
    assert need <= set(rows[0])
    assert {r["op"] for r in rows} >= {"upgrade", "page_table", "swa_indices"}
    assert {r["impl"] for r in rows} == {"torch", "triton"}
    with (tmp_path / "kernels_checks.csv").open() as f:
        checks = list(csv.DictReader(f))
    assert checks and all(c["passed"] == "True" for c in checks)
    meta = json.loads((tmp_path / "kernels_meta.json").read_text())
    assert meta["torch"] and meta["triton"] and "bytes_formula" in meta
    assert (tmp_path / "kernels_summary.csv").exists()


def test_pytest_benchmark_file_collects(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # benchmarks run, not xdist's
    path = ROOT / "benchmarks" / "test_kernels_bench.py"
    result = pytester.runpytest_inprocess(
        str(path), "-q", "-p", "no:cacheprovider", "-p", "no:xdist"
    )
    # on a CPU-only machine every benchmark is skipped; on a GPU they run
    assert result.ret == 0, "\n".join(result.outlines[-40:])
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) + outcomes.get("passed", 0) > 0, outcomes


def test_cuda_branch_with_stubbed_timers(monkeypatch, capsys):
    """Runs the benchmark's CUDA-only branch (sync check, capture, replay timing, bandwidth
    table, target verdicts) on CPU, with the CUDA timers and graph stubbed out."""
    # without the interpreter the "triton" ops fall back to the reference on CPU: fast, and
    # the Triton kernels themselves are covered by test_kernels_triton.py
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_common as bc
    import bench_report
    import kernels_gpu
    import torch

    class FakeGraph:
        def __init__(self, fn):
            self.fn = fn

        def replay(self):
            self.fn()

    def fake_eager(fn, flush, samples):
        return [(us, us) for us in bc.time_host(fn, samples)]

    monkeypatch.setattr(bc, "L2Flusher", lambda device: lambda: None)
    monkeypatch.setattr(bc, "time_eager_cuda", fake_eager)
    monkeypatch.setattr(bc, "capture", lambda fn: (FakeGraph(fn), fn()))
    monkeypatch.setattr(bc, "time_graph_cuda", lambda g, flush, n: bc.time_host(g.replay, n))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", lambda mode: None)
    args = kernels_gpu.parse_args(["--out", "unused", "--samples", "2"])
    bench = kernels_gpu.Bench(args, torch, bc, torch.device("cpu"))
    bench.cuda = True
    bench.run_noop()
    for mode in ("decode", "verify"):
        bench.run_case(bc.Case("pro", mode, 256 if mode == "verify" else 2, 130), list(bc.OPS))
    summary = bench_report.summarize(bench, bc.H200_COPY_BW)
    verdicts = bench_report.print_summary(summary, bench.checks, cuda=True)
    out = capsys.readouterr().out
    assert "time vs bytes/bandwidth" in out and "0 failed" in out
    assert any(name.startswith("upgrade eager >=3x") for name in verdicts)
    checks = {c["check"] for c in bench.checks}
    assert checks >= {"equals_reference", "no_sync", "no_sync_ledger", "graph_capture_replay"}
    assert all(c["passed"] for c in bench.checks), [c for c in bench.checks if not c["passed"]]
    assert {r["mode"] for r in bench.samples} == {"eager", "graph"}
