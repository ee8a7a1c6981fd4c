"""`--repeats auto`: processes until the named Δ is sharp enough, or the budget or the most
processes say stop, and the run says which; `--against REF`: interleaved pairs of workers of two
trees, gathered into two run folders that `compare` pairs by pair."""

from __future__ import annotations

import json

from harness.results.compare import compare_runs
from harness.results.load import load_run
from harness.results.precision import DeltaName
from harness.results.summary import format_summary
from harness.runner.against import against
from harness.runner.auto_repeats import BUDGET, MOST, REACHED, Repeats
from harness.runner.bench import run_bench
from harness.runner.device import open_device
from harness.runner.repeats import pass_rows
from harness.scenario import load_scenario
from tests.support.report_fixtures import write_run
from tests.support.runner_fakes import fake_builder

FEW = [
    "serving.batch_sizes=[4]",
    "serving.variants=[before, dropped]",
    "steps={warmup: 0, count: 1, time_emu: 2, round_steps: 2}",
]


def test_auto_stops_at_its_target_not_before_the_least_processes():
    auto = Repeats(50, target_us=25.0, budget_s=360.0, min_processes=3)
    sharp = lambda: {"bs=4 dropped": 24.0}  # noqa: E731
    blunt = lambda: {"bs=4 dropped": 26.0}  # noqa: E731
    assert auto.stop(2, 10.0, 5.0, sharp) is None  # too few processes to trust the interval
    assert auto.stop(3, 10.0, 5.0, sharp) == REACHED
    assert auto.stop(3, 10.0, 5.0, blunt) is None
    assert auto.stop(9, 356.0, 5.0, blunt) == BUDGET  # one more would end past 6 minutes
    assert auto.stop(50, 10.0, 5.0, blunt) == MOST
    assert Repeats(3).stop(2, 1e9, 1.0, blunt) is None and Repeats(3).stop(3, 0, 0, blunt) == MOST


def test_a_run_with_repeats_auto_records_and_prints_why_it_stopped(tmp_path):
    loaded = load_scenario("nonspec", FEW)
    auto = Repeats(4, target_us=1e12, deltas=(DeltaName("dropped", 4),), min_processes=2)
    with open_device("emu") as dh:
        spawn = lambda job, _i, _n: pass_rows(job, dh)  # noqa: E731
        folder = run_bench(loaded, dh, "time", tmp_path, fake_builder, False, auto, spawn)
    rep = folder.meta["repeats"]
    assert (rep["stopped"], rep["processes"], folder.meta["processes"]) == (REACHED, 2, 2)
    assert list(rep["half_widths_us"]) == ["nonspec bs=4 dropped"]
    assert "--repeats auto --half-width 1e+12us" in folder.meta["command"]
    assert "Repeats: auto, 2 processes: every named Δ reached the target" in format_summary(
        folder.path
    )


def test_against_runs_interleaved_pairs_into_two_run_folders_compared_by_pair(tmp_path):
    side = load_run(write_run(tmp_path / "w", "eagle", device="cuda", batch_sizes=(8,), steps=4))
    ran = []

    def fake_side(job, out):
        ran.append((job.tree.ref or "this", job.which))
        return side

    loaded = load_scenario("eagle", [])
    a, b, why = against(
        loaded, ".", [], "time", tmp_path / "runs", Repeats(2), lambda s: {}, "cmd", fake_side
    )
    assert ran == [("this", "time"), (".", "time"), (".", "time"), ("this", "time")]  # A B, B A
    assert why == MOST and b.path.name == f"{a.path.name}-against"
    for folder in (a, b):
        meta = json.loads((folder.path / "meta.json").read_text())
        assert meta["processes"] == 2
        assert meta["against_run"] == {"A": a.path.name, "B": b.path.name}
    # each pair's rows carry the pair as their process
    assert sorted(load_run(b.path).latency["process"].unique()) == [0, 1]
    assert "interleaved pairs of one --against run, paired" in compare_runs(a.path, b.path)
