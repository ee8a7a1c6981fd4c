"""`bench --repeats N`: the passes in N fresh worker processes, rows gathered into one run
folder with their process; a dead worker leaves the run incomplete with the reason."""

from __future__ import annotations

import csv
import json
import os

import pytest

from harness.errors import CheckFailed
from harness.results.load import load_run
from harness.results.run_folder import is_complete
from harness.results.summary import format_summary
from harness.results.tables import COLUMNS
from harness.runner.bench import run_bench
from harness.runner.device import open_device
from harness.runner.repeats import ProcessJob, in_fresh_process, pass_rows
from harness.scenario import load_scenario
from tests.support.runner_fakes import FakeWorld, dying_builder, fake_builder, pid_builder

SETS = [
    "serving.batch_sizes=[4]",
    "serving.variants=[before, dropped]",
    "steps={warmup: 2, count: 2, time: 40, time_emu: 40, round_steps: 10}",
]
FEW = [*SETS[:2], "steps={warmup: 1, count: 1, time: 2, time_emu: 2, round_steps: 2}"]


def _rows(folder, table):
    with open(folder / f"{table}.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_repeat_is_a_fresh_spawned_interpreter_and_hands_its_rows_back():
    loaded = load_scenario("nonspec", FEW)
    FakeWorld.spin = ("set in the parent", 1.0)  # a forked child would inherit it
    try:
        rows = in_fresh_process(ProcessJob(loaded, "emu", ("time",), pid_builder, False), 1, 2)
    finally:
        FakeWorld.spin = ("", 0.0)
    (detail,) = {f[-1] for f in rows.findings}
    pid, spin = detail.split(" ", 1)
    assert pid != str(os.getpid()) and spin == repr(("", 0.0))
    assert len(rows.latency) > 0 and all(
        o[COLUMNS["outcomes"].index("status")] == "ok" for o in rows.outcomes
    )


def test_rows_of_every_process_land_in_one_folder_with_their_process(tmp_path):
    loaded = load_scenario("nonspec", FEW)
    seen = []

    def runner(job, i, n):
        seen.append((i, n, job.passes))
        return pass_rows(job, dh)

    with open_device("emu") as dh:
        folder = run_bench(loaded, dh, "both", tmp_path, fake_builder, False, 2, runner)
    assert seen == [(0, 2, ("count", "time")), (1, 2, ("time",))]
    meta = json.loads((folder.path / "meta.json").read_text())
    assert meta["processes"] == 2 and "--pass both --repeats 2 " in meta["command"]
    assert {r["process"] for r in _rows(folder.path, "counts")} == {"0"}
    assert {r["process"] for r in _rows(folder.path, "latency")} == {"0", "1"}
    assert "95% CI between processes" in format_summary(folder.path)


@pytest.mark.slow
def test_a_dead_worker_leaves_the_run_incomplete_with_the_reason(tmp_path):
    loaded = load_scenario("nonspec", FEW)
    with open_device("emu") as dh, pytest.raises(CheckFailed, match="worker process 0 of 2 died"):
        run_bench(loaded, dh, "time", tmp_path, builder=dying_builder, repeats=2)
    (folder,) = (tmp_path / "nonspec").iterdir()
    assert not is_complete(folder)
    assert "died" in json.loads((folder / "meta.json").read_text())["stopped"]


def _in_this_process(dh):
    """A worker runner for tests: the job in this process (fresh worlds, not a fresh process)."""
    return lambda job, _i, _n: pass_rows(job, dh)


def test_a_planted_spin_is_resolved_beyond_the_a_a_noise_floor(tmp_path):
    """1 ms of host spin in `dropped`: far beyond what a loaded 2-core machine's noise hides
    (30 µs is resolved on synthetic data, tests/results/test_results_replicas.py)."""
    loaded = load_scenario("nonspec", SETS)
    FakeWorld.spin = ("dropped", 1000.0)
    try:
        with open_device("emu") as dh:
            folder = run_bench(
                loaded, dh, "time", tmp_path, fake_builder, False, 3, _in_this_process(dh)
            )
    finally:
        FakeWorld.spin = ("", 0.0)
    lines = format_summary(folder.path).splitlines()
    (aa,) = [x for x in lines if "A/A (" in x]
    (dropped,) = [x for x in lines if "dropped vs before" in x]
    assert "noise floor ±" in aa and "noise floor ±" in dropped
    assert not dropped.endswith(("difference", "floor"))
    run = load_run(folder.path)
    assert run.latency["process"].nunique() == 3
    # what each sync site costs: `before`'s read-back of its lengths, once per step, in each
    # process and both arms; `dropped` makes no sync
    waits = run.waits
    assert set(waits["variant"]) == {"before"} and set(waits["arm"]) == {"", "aa"}
    assert set(waits["site"].str.split(":").str[0]) == {"tests/support/runner_fakes.py"}
    assert len(waits) == 3 * 2 * 40
    at = lines.index(next(x for x in lines if x.startswith("What each sync site costs")))
    assert (
        "95% CI between processes" in lines[at]
        and "(d2h_read, 1.00 calls per step)" in lines[at + 2]
    )


def test_repeats_is_refused_for_a_world_that_launches_its_own_processes(capsys):
    from harness.cli import main

    assert main(["bench", "--scenario", "dp_attention", "--repeats", "2", "--device", "emu"]) == 2
    err = capsys.readouterr().err
    assert "scenarios/dp_attention.yaml" in err and "--repeats" in err and "Traceback" not in err
