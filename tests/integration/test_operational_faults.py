"""Faults of the environment and signals: a full disk, a file-size limit, a bad environment
variable, SIGTERM; and readers that must not misread a run. Each is one line naming the file
and the cause, with its exit code (3 for the environment, 143 for SIGTERM, 2 for bad input),
and a run folder left behind is marked stopped with the reason."""

from __future__ import annotations

import codecs
import errno
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.results.compare import compare_runs
from harness.results.run_folder import INCOMPLETE_MARKER, is_complete
from tests.support.full_disk import full_disk_for
from tests.support.overrides import overridden
from tests.support.report_fixtures import reseal, write_run

REPO = Path(__file__).resolve().parents[2]
TINY = ["serving.batch_sizes=4", "serving.variants=after", "steps.warmup=0", "steps.count=1"]
BENCH = ["bench", "--scenario", "nonspec", "--device", "emu", "--pass", "count", "--no-progress"]
LONGER = [*BENCH, *(a for s in overridden(TINY, "steps.count=40") for a in ("--set", s))]
BENCH += [a for s in TINY for a in ("--set", s)]


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _stopped_folder(out: Path) -> tuple[Path, dict]:
    (folder,) = (out / "nonspec").iterdir()
    assert (folder / INCOMPLETE_MARKER).exists() and not is_complete(folder)
    return folder, json.loads((folder / "meta.json").read_text())


def test_sigterm_during_bench_is_143_and_the_folder_says_why(tmp_path, capsys, monkeypatch):
    def terminated(*args, **kwargs):  # what CI's or `timeout`'s SIGTERM does mid-pass
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the pass")

    monkeypatch.setattr("harness.runner.repeats.run_count_pass", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert main([*BENCH, "--out", str(tmp_path)]) == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before  # main leaves it as it found it
    folder, meta = _stopped_folder(tmp_path)
    line = _one_line(capsys.readouterr().err.split("emulated: host times only)\n", 1)[1])
    assert line == f"terminated (SIGTERM): run folder left incomplete: {folder}"
    assert meta["stopped"] == "terminated (SIGTERM)"
    assert "terminated (SIGTERM)" in (folder / INCOMPLETE_MARKER).read_text()


def test_a_full_disk_while_bench_writes_is_exit_3_naming_the_file(tmp_path, capsys, monkeypatch):
    """The write that fails gives no file name (a full disk fails `write`, not `open`)."""
    full_disk_for(monkeypatch, "latency.csv")
    assert main([*BENCH, "--out", str(tmp_path)]) == 3
    folder, meta = _stopped_folder(tmp_path)
    line = _one_line(capsys.readouterr().err.split("emulated: host times only)\n", 1)[1])
    reason = f"{folder / 'latency.csv'}: {os.strerror(errno.ENOSPC)}"
    assert line == f"error: {reason}; run folder left incomplete: {folder}"
    assert meta["stopped"] == reason and reason in (folder / INCOMPLETE_MARKER).read_text()
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


# Run in a fresh interpreter: the bad variable must not break importing the harness, and the
# file-size limit is the kernel's own (set once the imports are done).
FSIZE_SCRIPT = """
import contextlib, io, json, os, resource, sys
from harness.cli import main
import matplotlib.figure, pandas  # imported before the limit: their caches are theirs
run, out, bench, longer = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
results = []
def call(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    results.append((rc, err.getvalue()))
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
call(["report", run, "--out", out + "/plots"])
call([*bench, "--out", out + "/refused"])
del os.environ["SYNCLEDGER_PAGEABLE_STAGING_BYTES"]
call([*longer, "--out", out + "/runs"])  # counts.csv > 8 KiB
print(json.dumps(results))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE")
def test_a_file_size_limit_and_a_bad_staging_size_are_exit_3(tmp_path):
    """A fresh interpreter with SYNCLEDGER_PAGEABLE_STAGING_BYTES=abc and an 8 KiB file-size
    limit: report (which never classifies a copy) runs until a PNG exceeds the limit; bench is
    refused for the variable before anything is made; without it, bench stops at a table."""
    run = write_run(tmp_path / "fixture", "eagle", batch_sizes=(1,), steps=2)
    env = {**os.environ, "SYNCLEDGER_PAGEABLE_STAGING_BYTES": "abc", "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-c", FSIZE_SCRIPT, str(run), str(tmp_path), json.dumps(BENCH)]
    argv.append(json.dumps(LONGER))
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (report_rc, report_err), (refused_rc, refused_err), (bench_rc, bench_err) = json.loads(
        done.stdout.strip().splitlines()[-1]
    )
    too_large = f"{os.strerror(errno.EFBIG)} (the file-size limit, ulimit -f)"
    assert report_rc == 3
    assert (
        _one_line(report_err) == f"error: {tmp_path / 'plots/01_syncs_by_region.png'}: {too_large}"
    )
    assert refused_rc == 3 and not (tmp_path / "refused").exists()
    assert _one_line(refused_err).startswith(
        "error: environment variable SYNCLEDGER_PAGEABLE_STAGING_BYTES='abc': expected a number"
    )
    assert bench_rc == 3
    _folder, meta = _stopped_folder(tmp_path / "runs")
    assert too_large in bench_err.strip().splitlines()[-1] and too_large in meta["stopped"]


def test_trace_into_a_folder_is_exit_2(tmp_path, capsys):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    assert main(["trace", str(run), "-o", str(tmp_path)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line == f"error: {tmp_path}: --output: is a folder, not a file"


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (lambda m: "{not json", "meta.json: not valid JSON"),
        (lambda m: {**m, "result_format_version": 3}, "result format version 3, older than"),
        (lambda m: {**m, "result_format_version": 99}, "result format version 99, newer than"),
        (lambda m: {**m, "result_format_version": "4"}, "result format version '4', result_"),
        (lambda m: {k: v for k, v in m.items() if k != "result_format"}, "not a run's meta.json"),
        (lambda m: {**m, "world": "servin\u200bg"}, "world: unknown world 'servin\\u200bg'; this"),
    ],
)
def test_a_meta_json_that_cannot_be_read_is_said_as_such(tmp_path, capsys, edit, expect):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    meta = edit(json.loads((run / "meta.json").read_text()))
    (run / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    for command in (["report", str(run)], ["trace", str(run)], ["compare", str(run), str(run)]):
        assert main(command) == 2
        line = _one_line(capsys.readouterr().err)
        assert expect in line and "incomplete" not in line, line


def test_a_meta_json_with_a_byte_order_mark_reads_as_the_run_it_is(tmp_path, capsys):
    """Saved by an editor that writes a UTF-8 byte-order mark: still this complete run."""
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    (run / "meta.json").write_bytes(codecs.BOM_UTF8 + (run / "meta.json").read_bytes())
    assert is_complete(run)
    assert main(["trace", str(run), "-o", str(tmp_path / "t.json")]) == 0, capsys.readouterr().err


def test_stacks_that_are_not_a_mapping_are_named(tmp_path, capsys):
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    (run / "stacks.json").write_text("[]")
    reseal(run, "stacks.json")
    assert main(["trace", str(run)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert (
        line == f"error: {run / 'stacks.json'}: expected a mapping of stack ids to stacks, got list"
    )


def test_an_ascii_terminal_gets_us_not_a_traceback(tmp_path, monkeypatch):
    """`PYTHONIOENCODING=ascii` (or a C locale): µs and Δ are written as "us" and "delta"."""
    run = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="ascii") for _ in range(2))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["compare", str(run), str(run)]) == 0
    out.flush()
    text = out.buffer.getvalue().decode("ascii")
    assert "delta p50 = +0.0 us (no interval)" in text


def test_compare_of_different_configurations_says_what_differs(tmp_path):
    """Two runs with the very same samples: every difference is exactly 0 (and, one process
    each, no interval); once their configurations differ, compare names the keys."""
    a = write_run(tmp_path / "a", "eagle", batch_sizes=(1,), steps=12)
    b = write_run(tmp_path / "b", "eagle", batch_sizes=(1,), steps=12)
    for run, seed in ((a, 0), (b, 0)):
        meta = json.loads((run / "meta.json").read_text())
        meta["config"] = {"seed": seed, "steps": {"count": 12}}
        (run / "meta.json").write_text(json.dumps(meta))
    same = compare_runs(a, b)
    assert "configurations differ" not in same and "no interval to offer" in same
    assert "Δ p50 = +0.0 µs (no interval)" in same
    meta = json.loads((b / "meta.json").read_text())
    meta["config"] = {"seed": 7, "steps": {"count": 12}}
    (b / "meta.json").write_text(json.dumps(meta))
    differ = compare_runs(a, b)
    assert "A and B did not run the same work: seed: A 0, B 7" in differ


def test_sigterm_while_dp_ranks_start_names_only_a_folder_that_exists(
    tmp_path, capsys, monkeypatch
):
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.launcher import api

    made = []

    def launcher(config, entrypoint):
        def launch(job):
            if made:  # rank 0 made its folder before the signal came
                from harness.results.run_folder import RunFolder

                RunFolder.create(job.out_root, job.loaded.name, job.run_id, {"complete": False})
            raise SignalException("Process got signal: 15", sigval=signal.SIGTERM)

        return launch

    monkeypatch.setattr(api, "elastic_launch", launcher)
    argv = ["bench", "--scenario", "dp_attention", "--device", "emu", "--out", str(tmp_path)]
    assert main(argv) == 128 + signal.SIGTERM
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == "terminated (SIGTERM): stopped before the run folder was made"
    assert not (tmp_path / "dp_attention").exists()
    made.append(True)
    assert main(argv) == 128 + signal.SIGTERM
    (folder,) = (tmp_path / "dp_attention").iterdir()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"terminated (SIGTERM): run folder left incomplete: {folder}"
    assert json.loads((folder / "meta.json").read_text())["stopped"] == "terminated (SIGTERM)"


def test_stray_launcher_variables_do_not_make_bench_a_rank(tmp_path, monkeypatch):
    """RANK, WORLD_SIZE, LOCAL_RANK and MASTER_ADDR as a SLURM or torchrun shell leaves them
    for its children: `bench` of a DP scenario still starts its own ranks (only torch's
    agent, which names its run, makes this process one of them)."""
    from harness.dp import launch
    from harness.dp.job import AGENT_VARIABLE, RankResult

    stray = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "10.255.255.1"}
    for name, value in stray.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(AGENT_VARIABLE, raising=False)
    started = []

    def launch_local(job):
        started.append(job.loaded.name)
        return RankResult(tmp_path, complete=True, reason=None)

    def run_rank(job):
        raise AssertionError("this process took itself for a rank")

    monkeypatch.setattr(launch, "launch_local", launch_local)
    monkeypatch.setattr(launch, "run_rank", run_rank)
    argv = ["bench", "--scenario", "dp_attention", "--device", "emu", "--out", str(tmp_path)]
    assert main(argv) == 0 and started == ["dp_attention"]
