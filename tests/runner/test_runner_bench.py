"""The runner with a stand-in world: run folder, tables, outcomes, incomplete runs, summary."""

from __future__ import annotations

import csv
import hashlib
import inspect
import json

import pytest

from harness.errors import Interrupted
from harness.results.compare import compare_runs
from harness.results.run_folder import INCOMPLETE_MARKER, is_complete
from harness.results.summary import format_summary
from harness.results.tables import COLUMNS
from harness.runner.bench import run_bench
from harness.runner.device import open_device
from harness.scenario import load_scenario
from tests.support.overrides import overridden
from tests.support.runner_fakes import fake_builder

SETS = [
    "serving.variants=[before, after]",
    "serving.serving_mode=specv2",
    "serving.mirror=[auto, absent]",
    "serving.batch_sizes=[4, 32]",
    "steps={warmup: 1, count: 5, time: 4, time_emu: 4}",
]


def _rows(folder, table):
    with open(folder / f"{table}.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(folder / f"{table}.csv", newline="") as f:
        assert tuple(next(csv.reader(f))) == COLUMNS[table]
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    loaded = load_scenario("nonspec", SETS)
    with open_device("emu") as dh:
        folder = run_bench(loaded, dh, "both", out, fake_builder, show_progress=False)
    return folder.path


def test_folder_complete_with_meta(run):
    assert run.parent.name == "nonspec" and is_complete(run)
    assert not (run / INCOMPLETE_MARKER).exists()
    meta = json.loads((run / "meta.json").read_text())
    for key in (
        "result_format_version",
        "command",
        "git_commit",
        "device_kind",
        "gpu_name",
        "gpu_driver",
        "torch_version",
        "triton_version",
        "scenario_sha256",
        "seed",
        "start_time",
        "machine_info",
    ):
        assert key in meta, key
    assert meta["device_kind"] == "emu" and meta["complete"] is True
    assert "--device emu" in meta["command"] and "--set" in meta["command"]
    for name in (
        "counts.csv",
        "syncs.csv",
        "latency.csv",
        "outcomes.csv",
        "findings.csv",
        "stacks.json",
    ):
        assert (run / name).is_file()
        assert meta["sha256"][name] == hashlib.sha256((run / name).read_bytes()).hexdigest()
    for table, n in meta["rows"].items():
        assert len(_rows(run, table)) == n


def test_counts_zero_rows_and_phases(run):
    rows = _rows(run, "counts")
    after = [
        r
        for r in rows
        if r["variant"] == "after" and r["mirror"] == "auto" and r["batch_size"] == "4"
    ]
    measured = [r for r in after if r["path"] == "graph"]
    assert {r["step"] for r in measured} == {str(s) for s in range(1, 6)}  # warm-up is step 0
    # every region entered has a row, with zero syncs here
    assert {r["region"] for r in measured} == {
        "step",
        "step/scheduler/mirror",
        "step/metadata/out_graph",
        "step/forward",
    }
    assert all(r["syncs"] == "0" for r in measured)
    assert {r["path"] for r in after} == {"capture", "warmup", "graph"}
    cap = [r for r in after if r["path"] == "capture" and r["region"] == "step/metadata/out_graph"]
    assert [(r["step"], r["syncs"]) for r in cap] == [("-1", "1")]


def test_syncs_attributed(run):
    syncs = _rows(run, "syncs")
    mirror = [
        s for s in syncs if s["variant"] == "before" and s["region"] == "step/scheduler/mirror"
    ]
    assert mirror and all(
        s["kind"] == "d2h_read" and "runner_fakes.py" in s["location"] for s in mirror
    )
    stacks = json.loads((run / "stacks.json").read_text())
    assert all(s["stack_id"] in stacks for s in syncs)


def test_failing_cell_is_an_outcome(run):
    out = _rows(run, "outcomes")
    # cells x passes, and the time pass's A/A arm (a second `before` of each mirror and size)
    assert len(out) == 2 * 2 * 2 * 2 + 2 * 2
    bad = [r for r in out if r["status"] != "ok"]
    assert {(r["variant"], r["mirror"]) for r in bad} == {("before", "absent")}
    assert {r["arm"] for r in out if r["pass"] == "time" and r["variant"] == "before"} == {"", "aa"}
    assert all(
        r["exception"] == "AssertionError" and "runner_fakes.py" in r["location"] for r in bad
    )
    assert all(r["function"] == "assert_mirror" for r in bad)
    ok_after = [r for r in out if r["variant"] == "after" and r["status"] == "ok"]
    assert len(ok_after) == 8


def test_latency_emu_host_only(run):
    lat = _rows(run, "latency")
    assert lat and {r["device"] for r in lat} == {"emu"} and {r["metric"] for r in lat} == {"host"}
    assert {r["unit"] for r in lat} == {"us"}
    it = [
        r
        for r in lat
        if r["region"] == "iteration"
        and r["variant"] == "after"
        and r["batch_size"] == "4"
        and r["mirror"] == "auto"
    ]
    assert [r["path"] for r in it] == ["warmup"] + ["graph"] * 4
    setup = [r for r in lat if r["region"] == "warmup_and_capture"]
    assert setup and {(r["step"], r["path"]) for r in setup} == {("-1", "capture")}


def test_findings(run):
    f = _rows(run, "findings")
    assert f and {r["kind"] for r in f} == {"stale_mirror"}


def test_summary_and_compare(run):
    text = format_summary(run)
    assert "TOTAL" in text and "bs=32" in text and "host times only" in text
    assert "AssertionError" in text
    assert "(no difference)" in compare_runs(run, run)


def test_interrupted_run_stays_incomplete(tmp_path):
    loaded = load_scenario("nonspec", overridden(SETS, "serving.variants=[after]"))

    def boom(sc, cell, device):
        raise KeyboardInterrupt

    with open_device("emu") as dh, pytest.raises(Interrupted) as ei:
        run_bench(loaded, dh, "count", tmp_path, boom, show_progress=False)
    (folder,) = list((tmp_path / "nonspec").iterdir())
    assert str(folder) in str(ei.value) and "incomplete" in str(ei.value)
    assert (folder / INCOMPLETE_MARKER).exists() and not is_complete(folder)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["status"] == "incomplete" and meta["complete"] is False
    assert meta["stopped"] == "interrupted (Ctrl-C)"


def test_compare_cli(run, tmp_path, capsys):
    from harness.cli import main

    assert main(["compare", str(run), str(run)]) == 0
    assert "Syncs per measured step" in capsys.readouterr().out
    half = tmp_path / "half"
    half.mkdir()
    meta = json.loads((run / "meta.json").read_text())
    (half / "meta.json").write_text(json.dumps({**meta, "complete": False}))
    assert main(["compare", str(run), str(half)]) == 2
    assert "incomplete" in capsys.readouterr().err


def test_time_pass_cuda_rows_with_emulated_events():
    """The CUDA branch of the time pass (events, e2e) run against the emulated torch.cuda."""
    from harness.runner.time_pass import run_time_pass

    sets = overridden(
        SETS, "serving.variants=[after]", "serving.mirror=auto", "serving.batch_sizes=[4]"
    )
    sc = load_scenario("nonspec", sets).scenario
    with open_device("emu") as dh:
        rows = run_time_pass(sc, dh.device, "cuda", fake_builder, show_progress=False)
    outcome = dict(zip(COLUMNS["outcomes"], rows.outcomes[0]))
    assert outcome["status"] == "ok", rows.outcomes
    latency = [dict(zip(COLUMNS["latency"], r)) for r in rows.latency]
    it = [r for r in latency if r["region"] == "iteration" and r["path"] == "graph"]
    assert sorted({r["metric"] for r in it}) == ["device", "e2e", "host"]
    assert all(r["device"] == "cuda" and r["value"] >= 0 for r in it)


def test_a_failure_raised_inside_the_ledger_is_placed_at_the_callers_line() -> None:
    from harness.runner.rows import failure_site
    from syncledger.within import resolve_within

    with pytest.raises(ValueError) as caught:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        resolve_within([])  # raises inside syncledger/within.py
    where, function = failure_site(caught.value)
    assert where == f"tests/runner/test_runner_bench.py:{line}"
    assert function == "test_a_failure_raised_inside_the_ledger_is_placed_at_the_callers_line"
