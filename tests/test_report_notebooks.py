"""The plot notebooks: committed without outputs, and run headless top to bottom in CI.

One run is a real, tiny emulated bench run (made here through the CLI, so a change in the
result files breaks this test rather than the notebooks silently); the other is the synthetic
GPU-shaped run, for the device and end-to-end paths the emulated device cannot produce.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from report_fixtures import write_run

from harness.cli import main
from harness.report import find_runs
from harness.report.notebooks import NOTEBOOKS, NOTEBOOKS_DIR, _kernel_manager, execute_notebook

REPO = Path(__file__).resolve().parents[1]
TINY_BENCH = [
    "--scenario",
    "eagle",
    "--device",
    "emu",
    "--no-progress",
    "--set",
    "serving.batch_sizes=[4]",
    "--set",
    "serving.context_len=512",
    "--set",
    "steps.warmup=1",
    "--set",
    "steps.count=2",
    "--set",
    "steps.time=3",
]
NOTEBOOK_BUDGET_S = 60


@pytest.fixture(scope="module")
def emulated_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    subprocess.run(
        [sys.executable, "-m", "harness", "bench", *TINY_BENCH, "--out", str(root)],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (run,) = find_runs(root)
    return run


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "RUN = None" in params[0].source


def _images(nb) -> int:
    return sum(
        "image/png" in out.get("data", {})
        for c in nb.cells
        if c.cell_type == "code"
        for out in c.outputs
    )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_on_an_emulated_run(name, emulated_run, tmp_path):
    ex = execute_notebook(name, emulated_run, tmp_path)
    assert ex.error is None, ex.error
    assert not list(REPO.glob("kernel-ipc*"))  # kernel sockets stay in a private temp folder
    assert ex.seconds < NOTEBOOK_BUDGET_S
    nb = nbformat.read(ex.path, as_version=4)
    # every figure of the notebook that the run has data for (no sync-cost cells here)
    assert _images(nb) == {"sync_counts.ipynb": 4, "step_latency.ipynb": 3}[name]
    text = "".join(
        out.get("text", "") for c in nb.cells if c.cell_type == "code" for out in c.outputs
    )
    assert "emulated device (host times only)" in text  # the run label printed at the top


def test_latency_notebook_on_a_gpu_shaped_run(tmp_path):
    run = write_run(tmp_path / "runs", "eagle", device="cuda", batch_sizes=(1, 64), steps=5)
    ex = execute_notebook("step_latency.ipynb", run, tmp_path / "out")
    assert ex.error is None, ex.error
    text = "".join(
        out.get("text", "")
        for c in nbformat.read(ex.path, as_version=4).cells
        if c.cell_type == "code"
        for out in c.outputs
    )
    assert "headline metric: e2e" in text and "(Δ = cell − before; e2e time per step)" in text
    assert "bs=64 dropped vs before: −2.00 syncs per decode step" in text, text


def test_latency_notebook_on_a_sync_cost_run(tmp_path):
    root = tmp_path / "runs"
    sets = ["sync_cost.forward_us=[0]", "sync_cost.k=[0, 1]", "steps.count=1", "steps.time_emu=3"]
    argv = ["bench", "--scenario", "sync_cost", "--device", "emu", "--no-progress"]
    subprocess.run(
        [sys.executable, "-m", "harness", *argv, *(x for s in sets for x in ("--set", s)),
         "--out", str(root)],
        cwd=REPO, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (run,) = find_runs(root)
    ex = execute_notebook("step_latency.ipynb", run, tmp_path / "out")
    assert ex.error is None, ex.error
    nb = nbformat.read(ex.path, as_version=4)
    assert _images(nb) == 1  # the sync-cost figure; the serving figures have no cells here


def test_kernel_is_this_interpreter(tmp_path):
    km = _kernel_manager(tmp_path)
    assert km.kernel_spec.argv[0] == sys.executable


def test_notebooks_command_reports_failure(tmp_path, capsys, monkeypatch):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    broken = nbformat.v4.new_notebook()
    broken.cells = [
        nbformat.v4.new_code_cell("RUN = None", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("raise RuntimeError('a figure broke')"),
    ]
    nbformat.write(broken, tmp_path / "broken.ipynb")
    monkeypatch.setattr("harness.report.notebooks.NOTEBOOKS_DIR", tmp_path)
    monkeypatch.setattr("harness.report.notebooks.NOTEBOOKS", ("broken.ipynb",))
    assert main(["notebooks", str(run), "--out", str(tmp_path / "out")]) == 1
    assert "broken.ipynb: FAILED: RuntimeError: a figure broke" in capsys.readouterr().out


def _cut_counts(run: Path) -> Path:
    """counts.csv cut off mid-row, as a full disk or a killed copy leaves it."""
    counts = run / "counts.csv"
    data = counts.read_bytes()
    counts.write_bytes(data[: len(data) // 2])
    return counts


def test_notebooks_command_refuses_a_cut_table_before_any_kernel(tmp_path, capsys, monkeypatch):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    counts = _cut_counts(run)
    monkeypatch.setattr("harness.report.notebooks.execute_notebook", None)  # never reached
    assert main(["notebooks", str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{counts}: does not match meta.json" in err


def test_a_notebook_refuses_a_cut_table(tmp_path):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    counts = _cut_counts(run)
    ex = execute_notebook("sync_counts.ipynb", run, tmp_path / "out")
    assert ex.error is not None and "InputError" in ex.error and counts.name in ex.error
