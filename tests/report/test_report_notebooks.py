"""The plot notebooks: committed without outputs, and run headless top to bottom in CI.

One run is a real, tiny emulated bench run (made here through the CLI, so a change in the
result files breaks this test rather than the notebooks silently); the other is the synthetic
GPU-shaped run, for the device and end-to-end paths the emulated device cannot produce. The
notebooks run in one kernel per module, as `python -m harness notebooks` runs them in one.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat
import psutil
import pytest

from harness.cli import main
from harness.report import find_runs
from harness.report.notebooks import (
    NOTEBOOKS,
    NOTEBOOKS_DIR,
    NotebookKernel,
    _kernel_manager,
)
from tests.support.report_fixtures import write_run

REPO = Path(__file__).resolve().parents[2]
TINY_BENCH = [
    "--scenario",
    "nonspec",
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


@pytest.fixture(scope="module")
def emulated_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    assert main(["bench", *TINY_BENCH, "--out", str(root)]) == 0
    (run,) = find_runs(root)
    return run


@pytest.fixture(scope="module")
def kernel():
    with NotebookKernel() as k:
        yield k


def _kernels() -> set[int]:
    """This process's child processes that are IPython kernels."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if any("ipykernel" in part for part in p.cmdline()):
                out.add(p.pid)
        except psutil.NoSuchProcess:  # it ended while we looked
            pass
    return out


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


@pytest.mark.slow
def test_the_command_runs_every_notebook_in_one_kernel_then_shuts_it_down(
    emulated_run, tmp_path, capsys, monkeypatch
):
    """`python -m harness notebooks` on a real emulated run, with a broken notebook added
    last: the others run, the broken one is reported, exit 1, and no kernel is left."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in NOTEBOOKS:
        shutil.copy(NOTEBOOKS_DIR / name, folder / name)
    broken = nbformat.v4.new_notebook()
    broken.cells = [
        nbformat.v4.new_code_cell("RUN = None", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("raise RuntimeError('a figure broke')"),
    ]
    nbformat.write(broken, folder / "broken.ipynb")
    monkeypatch.setattr("harness.report.notebooks.NOTEBOOKS_DIR", folder)
    monkeypatch.setattr("harness.report.notebooks.NOTEBOOKS", (*NOTEBOOKS, "broken.ipynb"))
    out = tmp_path / "out"
    before = _kernels()
    assert main(["notebooks", str(emulated_run), "--out", str(out)]) == 1
    assert _kernels() == before  # the command's kernel is gone: no process left behind
    printed = capsys.readouterr().out
    for name in NOTEBOOKS:
        assert f"{name}: ok (" in printed, printed
    assert "broken.ipynb: FAILED: RuntimeError: a figure broke" in printed
    assert not list(REPO.glob("kernel-ipc*"))  # kernel sockets stay in a private temp folder
    for name in NOTEBOOKS:
        nb = nbformat.read(out / name, as_version=4)
        # every figure of the notebook that the run has data for (no sync-cost cells here)
        assert _images(nb) == {"sync_counts.ipynb": 4, "step_latency.ipynb": 3}[name]
        text = "".join(
            o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
        )
        assert "emulated device (host times only)" in text  # the run label printed at the top


def test_a_notebook_sees_nothing_the_one_before_defined(kernel, tmp_path, monkeypatch):
    for name, source in (("first.ipynb", "LEFT_OVER = 1"), ("second.ipynb", "LEFT_OVER")):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(source)]
        nbformat.write(nb, tmp_path / name)
    monkeypatch.setattr("harness.report.notebooks.NOTEBOOKS_DIR", tmp_path)
    assert kernel.execute("first.ipynb", None, tmp_path / "out").error is None
    error = kernel.execute("second.ipynb", None, tmp_path / "out").error
    assert error is not None and "NameError" in error and "LEFT_OVER" in error


def test_latency_notebook_on_a_gpu_shaped_run(kernel, tmp_path):
    run = write_run(tmp_path / "runs", "eagle", device="cuda", batch_sizes=(1, 64), steps=5)
    ex = kernel.execute("step_latency.ipynb", run, tmp_path / "out")
    assert ex.error is None, ex.error
    text = "".join(
        out.get("text", "")
        for c in nbformat.read(ex.path, as_version=4).cells
        if c.cell_type == "code"
        for out in c.outputs
    )
    assert "headline metric: e2e" in text and "(Δ = cell − before; e2e time per step;" in text
    assert "bs=64 dropped vs before: −2.00 syncs per decode step" in text, text


def test_latency_notebook_on_a_sync_cost_run(kernel, tmp_path):
    root = tmp_path / "runs"
    sets = ["sync_cost.forward_us=[0]", "sync_cost.k=[0, 1]", "steps.count=1", "steps.time_emu=3"]
    argv = ["bench", "--scenario", "sync_cost", "--device", "emu", "--no-progress"]
    assert main([*argv, *(x for s in sets for x in ("--set", s)), "--out", str(root)]) == 0
    (run,) = find_runs(root)
    ex = kernel.execute("step_latency.ipynb", run, tmp_path / "out")
    assert ex.error is None, ex.error
    nb = nbformat.read(ex.path, as_version=4)
    assert _images(nb) == 1  # the sync-cost figure; the serving figures have no cells here


def test_kernel_is_this_interpreter(tmp_path):
    km = _kernel_manager(tmp_path)
    assert km.kernel_spec.argv[0] == sys.executable


def _cut_counts(run: Path) -> Path:
    """counts.csv cut off mid-row, as a full disk or a killed copy leaves it."""
    counts = run / "counts.csv"
    data = counts.read_bytes()
    counts.write_bytes(data[: len(data) // 2])
    return counts


def test_notebooks_command_refuses_a_cut_table_before_any_kernel(tmp_path, capsys, monkeypatch):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    counts = _cut_counts(run)
    monkeypatch.setattr("harness.report.notebooks.NotebookKernel", None)  # never reached
    assert main(["notebooks", str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{counts}: does not match meta.json" in err


def test_a_notebook_refuses_a_cut_table(kernel, tmp_path):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    counts = _cut_counts(run)
    ex = kernel.execute("sync_counts.ipynb", run, tmp_path / "out")
    assert ex.error is not None and "InputError" in ex.error and counts.name in ex.error
