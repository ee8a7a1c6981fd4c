"""Faults while running: an unwritable results folder and Ctrl-C each get one line and their
exit code (2, 130), never a traceback, and nothing is lost or mistaken for a finished run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.results.run_folder import INCOMPLETE_MARKER, is_complete

REPO = Path(__file__).resolve().parents[2]
TINY = """\
serving:
  model: flash
  serving_mode: nonspec
  batch_sizes: [4]
  context_len: 512
  variants: [after]
steps: {warmup: 1, count: 2}
"""


def _no_pass(*args, **kwargs):
    raise AssertionError("a pass ran although its results could not be written")


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def not_a_folder(tmp_path) -> Path:
    """A path no one can write into, even as root: its parent is a file."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    return blocker / "results"


def test_bench_unwritable_out_is_exit_2_before_any_pass(not_a_folder, capsys, monkeypatch):
    monkeypatch.setattr("harness.runner.repeats.run_count_pass", _no_pass)
    monkeypatch.setattr("harness.runner.repeats.run_time_pass", _no_pass)
    rc = main(["bench", "--scenario", "nonspec", "--device", "emu", "--out", str(not_a_folder)])
    assert rc == 2
    line = _one_line(capsys.readouterr().err)
    assert str(not_a_folder) in line and "--out" in line and "cannot write" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_bad_device_is_exit_2_with_nothing_made(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["bench", "--scenario", "nonspec", "--device", "cuda", "--out", str(out)]) == 2
    assert "--device" in _one_line(capsys.readouterr().err) and not out.exists()


def test_baseline_unwritable_folder_is_exit_2_before_any_pass(not_a_folder, capsys, monkeypatch):
    monkeypatch.setattr("harness.gate.run.run_count_pass", _no_pass)
    args = ["--baselines", str(not_a_folder), "--scenarios", "nonspec", "--device", "emu"]
    assert main(["baseline", *args]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(not_a_folder) in line and "--baselines" in line


def test_report_and_trace_unwritable_output_are_exit_2(tmp_path, not_a_folder, capsys):
    from tests.support.report_fixtures import write_run

    run = write_run(tmp_path / "runs", "eagle", batch_sizes=(1,), steps=2)
    assert main(["report", str(run), "--out", str(not_a_folder)]) == 2
    assert str(not_a_folder) in _one_line(capsys.readouterr().err)
    assert main(["trace", str(run), "-o", str(not_a_folder / "t.json")]) == 2
    assert str(not_a_folder) in _one_line(capsys.readouterr().err)


def test_an_output_never_replaces_a_fifo_or_a_file_of_its_run(tmp_path, capsys):
    """A FIFO stands for any device (`--junit /dev/null` as root): refused, left as it was."""
    from tests.support.report_fixtures import write_run

    run = write_run(tmp_path / "runs", "eagle", batch_sizes=(1,), steps=2)
    files = {p.name: p.read_bytes() for p in run.iterdir()}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    input_ = "is an input of this command (RUN): an output never overwrites it"
    for target, why in (
        (run / "counts.csv", input_),
        (run / "meta.json", input_),
        (fifo, "is a FIFO: an output never replaces one; name a regular file"),
    ):
        assert main(["trace", str(run), "-o", str(target)]) == 2
        assert _one_line(capsys.readouterr().err) == f"error: {target}: --output: {why}"
    assert {p.name: p.read_bytes() for p in run.iterdir()} == files and fifo.is_fifo()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_repeats_proof_on_cuda_without_a_gpu_is_exit_2_before_any_run(tmp_path, capsys):
    out = tmp_path / "proof"
    assert main(["repeats-proof", "--out", str(out), "--device", "cuda"]) == 2
    assert "--device" in _one_line(capsys.readouterr().err) and not out.exists()


def test_the_gpu_suite_fails_when_its_steps_fail(tmp_path):
    """Every step fails here (its Python is `false`)."""
    out = tmp_path / "suite"
    env = {**os.environ, "PYTHON": "false"}
    done = subprocess.run(
        ["bash", "benchmarks/gpu_suite.sh", str(out), "headline", "checks"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    steps = (out / "steps.txt").read_text().splitlines()
    assert done.returncode == 1 and len(steps) == 8
    assert done.stderr.strip().splitlines()[-1].startswith("gpu_suite: 8 of 8 steps failed")


def test_the_gpu_suite_refuses_an_unknown_part(tmp_path):
    done = subprocess.run(
        ["bash", "benchmarks/gpu_suite.sh", str(tmp_path / "suite"), "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "unknown part nope" in done.stderr


def _interrupt_count_pass(*args, **kwargs):
    raise KeyboardInterrupt


def test_ctrl_c_in_the_gate_is_one_line_and_130(capsys, monkeypatch):
    monkeypatch.setattr("harness.gate.run.run_count_pass", _interrupt_count_pass)
    assert main(["gate", "--device", "emu", "--no-progress"]) == 130
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("interrupted:") and "writes nothing" in line


def test_ctrl_c_in_baseline_says_what_was_rewritten(tmp_path, capsys, monkeypatch):
    from harness.gate import run as gate_run

    real = gate_run.run_count_pass
    calls = []

    def second_interrupts(sc, *args, **kwargs):
        calls.append(sc.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(sc, *args, **kwargs)

    monkeypatch.setattr(gate_run, "run_count_pass", second_interrupts)
    paths = []
    for name in ("first", "second"):
        paths.append(tmp_path / f"{name}.yaml")
        paths[-1].write_text(f"name: {name}\n{TINY}")
    args = ["--baselines", str(tmp_path / "b"), "--device", "emu", "--no-progress"]
    assert main(["baseline", *args, "--scenarios", *map(str, paths)]) == 130
    line = _one_line(capsys.readouterr().err)
    assert "first.json" in line and "others are unchanged" in line
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["first.json"]


@pytest.mark.slow
def test_ctrl_c_during_bench_leaves_an_incomplete_folder_and_one_line(tmp_path):
    """A real SIGINT to a running `python -m harness bench` (Python's own Ctrl-C handler is
    installed explicitly: a background shell may have started the test with SIGINT ignored)."""
    out = tmp_path / "runs"
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from harness.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = ["bench", "--scenario", "nonspec", "--device", "emu", "--no-progress"]
    argv += ["--out", str(out), "--set", "steps.count=100000"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("nonspec/*/meta.json")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run folder never appeared"
            time.sleep(0.2)
        time.sleep(1.0)  # well inside the count pass
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, (stdout, stderr)
    (folder,) = list((out / "nonspec").iterdir())
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == f"interrupted: run folder left incomplete: {folder}"
    assert (folder / INCOMPLETE_MARKER).exists() and not is_complete(folder)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["complete"] is False and meta["stopped"] == "interrupted (Ctrl-C)"
