"""`python -m harness trace`: a Chrome/Perfetto trace whose slices nest and hold their syncs."""

from __future__ import annotations

import json
from collections import defaultdict

import pandas as pd
import pytest

from harness.cli import main
from harness.report import load_run
from harness.report.trace import _forest, build_trace
from tests.support.report_fixtures import drop_time_pass, reseal, write_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return load_run(
        write_run(tmp_path_factory.mktemp("runs"), "eagle", batch_sizes=(8, 96), steps=4)
    )


def _slices(trace: dict) -> dict[tuple, list[dict]]:
    by_track = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by_track[(e["pid"], e["tid"])].append(e)
    return by_track


def test_slices_nest_on_every_track(run):
    for events in _slices(build_trace(run)).values():
        stack: list[tuple[float, float]] = []
        for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
            start, end = e["ts"], e["ts"] + e["dur"]
            while stack and stack[-1][1] <= start + 1e-6:
                stack.pop()
            if stack:  # inside the enclosing slice, never straddling its end
                assert end <= stack[-1][1] + 1e-3, e
            stack.append((start, end))


def test_every_sync_is_an_instant_inside_its_region(run):
    trace = build_trace(run)
    assert trace["otherData"]["syncs_placed"] == trace["otherData"]["syncs_in_run"] > 0
    slices = _slices(trace)
    instants = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert len(instants) == trace["otherData"]["syncs_in_run"]
    for e in instants:
        assert {"kind", "op", "location", "function", "stack"} <= set(e["args"])
        region = e["args"]["region"]
        holders = [
            s
            for s in slices[(e["pid"], e["tid"])]
            if s["name"] == region and s["ts"] <= e["ts"] <= s["ts"] + s["dur"]
        ]
        assert holders, e


def test_processes_are_named_per_cell_and_steps_do_not_overlap(run):
    trace = build_trace(run, max_steps=2)
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"]
    assert names[0] == "eagle · before · mirror=auto · bs 8" and len(names) == 6
    iterations = [e for e in trace["traceEvents"] if e.get("cat") == "iteration" and e["pid"] == 1]
    assert len(iterations) == 2
    assert iterations[0]["ts"] + iterations[0]["dur"] < iterations[1]["ts"]
    assert {"host_us", "device_us", "e2e_us"} <= set(iterations[0]["args"])


def test_forest_from_exit_order():
    rows = [
        {"region": r, "forward_mode": "", "path": "", "value_us": v}
        for r, v in [("step/a", 1), ("step/b/c", 2), ("step/b", 3), ("step", 10), ("step/a", 1)]
    ]
    roots = _forest(rows)
    assert [n.region for n in roots] == ["step", "step/a"]
    assert [c.region for c in roots[0].children] == ["step/a", "step/b"]
    assert [c.region for c in roots[0].children[1].children] == ["step/b/c"]


def test_start_us_gives_exact_layout(tmp_path):
    folder = write_run(tmp_path, "nonspec", device="emu", batch_sizes=(8,), steps=2)
    lat = pd.read_csv(folder / "latency.csv", keep_default_na=False)
    lat["start_us"] = 1.5  # every region starts 1.5 µs after the start of its step
    lat.to_csv(folder / "latency.csv", index=False)
    reseal(folder, "latency.csv")
    trace = build_trace(load_run(folder))
    assert trace["otherData"]["region_layout"] == "exact (start_us)"
    it = next(e for e in trace["traceEvents"] if e.get("cat") == "iteration")
    first = [e for e in trace["traceEvents"] if e.get("cat") == "region" and e["ts"] < it["dur"]]
    assert any(e["name"].count("/") >= 2 for e in first)  # nested ones too
    for e in first:
        assert e["ts"] == pytest.approx(it["ts"] + 1.5), e["name"]


def test_count_only_run_gets_unit_slices(tmp_path):
    folder = write_run(tmp_path, "eagle", batch_sizes=(8,), steps=2)
    drop_time_pass(folder)
    trace = build_trace(load_run(folder))
    assert trace["otherData"]["region_layout"].startswith("no time pass")
    assert trace["otherData"]["syncs_placed"] == trace["otherData"]["syncs_in_run"] > 0


def test_trace_command(run, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["trace", str(run.path), "-o", str(out), "--max-steps", "1"]) == 0
    trace = json.loads(out.read_text())
    assert trace["traceEvents"] and "ui.perfetto.dev" in capsys.readouterr().out
    assert main(["trace", str(run.path), "--max-steps", "0"]) == 2


def test_sync_in_a_region_the_time_pass_missed_goes_to_the_enclosing_slice(tmp_path):
    folder = write_run(tmp_path, "eagle", batch_sizes=(8,), steps=2)
    syncs = pd.read_csv(folder / "syncs.csv", keep_default_na=False)
    syncs.loc[0, "region"] = syncs.loc[0, "region"] + "/untimed"
    syncs.to_csv(folder / "syncs.csv", index=False)
    reseal(folder, "syncs.csv")
    trace = build_trace(load_run(folder))
    assert trace["otherData"]["syncs_placed"] == trace["otherData"]["syncs_in_run"]
