"""Atomic writes: two writers of one file (threads, processes) never share a temporary name, so
both finish and the file is one writer's whole content."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.results.files import atomic_path, write_atomic
from tests.support.report_fixtures import drop_time_pass, write_run

REPO = Path(__file__).resolve().parents[2]


def test_two_threads_writing_one_file_both_finish(tmp_path):
    target = tmp_path / "plot.png"
    both_open = threading.Barrier(2, timeout=10)
    errors: list[BaseException] = []

    def writer(text: str) -> None:
        try:
            with atomic_path(target) as tmp:
                tmp.write_text(text)
                both_open.wait()  # each has written its temporary file; now both rename
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("A" * 1000, "B" * 1000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert target.read_text() in ("A" * 1000, "B" * 1000)
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "t.json"
    write_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


@pytest.mark.slow
def test_two_reports_of_one_run_at_once(tmp_path):
    run = write_run(tmp_path / "runs", "eagle", batch_sizes=(1,), steps=2)
    drop_time_pass(run)  # a count-only run: its four figures are enough to race on
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    # one interpreter imports the CLI and the figures' modules, then forks the two reports:
    # they start together
    code = (
        "import os, sys; from harness.cli import build_parser, main; build_parser(); "
        "import harness.report.figures, harness.serving.figures, harness.results.load\n"
        "pids = []\n"
        "for _ in range(2):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        rc = main(['report', sys.argv[1]]); sys.stdout.flush(); os._exit(rc)\n"
        "    pids.append(pid)\n"
        "sys.exit(max(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(run)], cwd=REPO, env=env, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()
    pngs = sorted(p.name for p in (run / "plots").iterdir())
    assert pngs == [
        "01_syncs_by_region.png",
        "02_syncs_vs_batch.png",
        "03_sync_blame.png",
        "04_findings.png",
    ]
