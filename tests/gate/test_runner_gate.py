"""The gate with a stand-in world: pass, more syncs (exit 1, naming the line), fewer, bad baselines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.gate.baseline import observe, to_json
from harness.gate.run import run_gate, write_baselines
from harness.results.tables import COLUMNS
from harness.runner.count_pass import PassRows, run_count_pass
from harness.runner.device import open_device
from harness.scenario import load_scenario
from syncledger.snapshot_verdict import Tier
from tests.support import runner_fakes
from tests.support.runner_fakes import FakeWorld, fake_builder

STRICT = Tier(strict=True)
SETS = [
    "serving.variants=[before, after]",
    "serving.serving_mode=specv2",
    "serving.mirror=[auto, absent]",
    "serving.batch_sizes=[4, 32]",
    "steps={warmup: 1, count: 4}",
]


@pytest.fixture
def setup(tmp_path, monkeypatch):
    loaded = [load_scenario("nonspec", SETS)]
    monkeypatch.setattr(FakeWorld, "extra_sync", False)
    monkeypatch.setattr(FakeWorld, "broken_variant", "")
    with open_device("emu") as dh:
        write_baselines(loaded, tmp_path, dh, fake_builder, show_progress=False)
        yield loaded, tmp_path, dh


def test_baseline_format(setup):
    _, folder, _ = setup
    data = json.loads((folder / "nonspec.json").read_text())
    assert data["format"] == "dsv4-harness-baseline" and data["measured_steps"] == 4
    assert data["outcomes"]["before/absent/4"] == (
        "AssertionError in assert_mirror (tests/support/runner_fakes.py)"
    )
    mirror = [
        c
        for c in data["counts"]
        if c["variant"] == "before"
        and c["mirror"] == "auto"
        and c["region"] == "step/scheduler/mirror"
        and c["path"] == "graph"
    ]
    assert [c["syncs"] for c in mirror] == [4]  # 1 per measured step, 4 steps, bs=4
    assert any(c["syncs"] == 0 for c in data["counts"])  # zero keys kept


def test_gate_passes_unchanged(setup, capsys):
    loaded, folder, dh = setup
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert not res.failed
    assert "gate nonspec: ok" in capsys.readouterr().out


def test_gate_fails_on_planted_sync_and_names_line(setup, capsys, monkeypatch):
    loaded, folder, dh = setup
    monkeypatch.setattr(FakeWorld, "extra_sync", True)
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert res.failed
    out = capsys.readouterr().out
    lines = Path(runner_fakes.__file__).read_text().splitlines()
    lineno = next(i for i, t in enumerate(lines, 1) if "# PLANTED" in t)
    assert f"runner_fakes.py:{lineno}" in out and "d2h_read item" in out
    assert "in planted_sync" in out and "REGRESSED" in out


def test_gate_fewer_passes_with_note(setup, capsys, monkeypatch):
    loaded, folder, dh = setup
    data = json.loads((folder / "nonspec.json").read_text())
    for c in data["counts"]:
        if c["region"] == "step/metadata/eager" and c["path"] == "eager":
            c["syncs"] += 3  # the baseline now allows more than the code does
    (folder / "nonspec.json").write_text(json.dumps(data))
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert not res.failed and len(res.suites[0].differences) == 3
    assert "can be tightened" in capsys.readouterr().out
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False, tier=STRICT)
    assert res.failed and not res.suites[0].regressions  # strict: fewer fails too
    out = capsys.readouterr().out
    assert "CHANGED" in out and "(strict)" in out and "7 -> 4 syncs (fewer)" in out


@pytest.mark.parametrize("damage", ["missing", "json", "syncs", "format", "stale"])
def test_bad_baseline_is_input_error(setup, damage):
    loaded, folder, dh = setup
    path = folder / "nonspec.json"
    data = json.loads(path.read_text())
    if damage == "missing":
        path.unlink()
    elif damage == "json":
        path.write_text("{not json")
    elif damage == "syncs":
        data["counts"][0]["syncs"] = "many"
        path.write_text(json.dumps(data))
    elif damage == "format":
        data["format"] = "other"
        path.write_text(json.dumps(data))
    else:
        loaded = [load_scenario("nonspec", [*SETS, "seed=7"])]
    with pytest.raises(InputError) as ei:
        run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert "nonspec.json" in str(ei.value)


def test_gate_fails_when_a_cell_starts_failing(setup, capsys, monkeypatch):
    loaded, folder, dh = setup
    monkeypatch.setattr(FakeWorld, "broken_variant", "after")
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert res.failed
    out = capsys.readouterr().out
    assert "cell after/auto/4 now fails: RuntimeError at tests/support/runner_fakes.py:" in out


def test_time_pass_keys_do_not_stale_the_baseline(setup):
    _, folder, dh = setup
    loaded = [load_scenario("nonspec", [*SETS, "steps.time=7", "steps.time_emu=3"])]
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert not res.failed


def _edit_baseline(folder: Path, edit) -> None:
    path = folder / "nonspec.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _eager_max_entry(data: dict) -> dict:
    """after/auto/bs=32, eager: the measured steps' `max().item()`, one per step."""
    (entry,) = [
        c
        for c in data["counts"]
        if (c["variant"], c["mirror"], c["batch_size"], c["path"], c["region"])
        == ("after", "auto", 32, "eager", "step/metadata/eager")
    ]
    return entry


def test_more_syncs_at_a_key_already_nonzero_fails(setup, capsys):
    loaded, folder, dh = setup

    def one_sync_fewer(data):
        entry = _eager_max_entry(data)
        assert entry["syncs"] == 4 and len(entry["events"]) == 1  # the rule's precondition
        entry["syncs"] -= 1
        (sig,) = entry["events"]
        entry["events"][sig] -= 1

    _edit_baseline(folder, one_sync_fewer)
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert res.failed
    assert res.suites[0].regressions == [
        "after/mirror=auto/bs=32 DECODE path=eager region=step/metadata/eager: 3 -> 4 syncs "
        "(0.25 more per measured step)"
    ]
    out = capsys.readouterr().out
    lines = Path(runner_fakes.__file__).read_text().splitlines()
    lineno = next(i for i, t in enumerate(lines, 1) if "self.seq_lens.max().item()" in t)
    assert (
        f"d2h_read item at tests/support/runner_fakes.py:{lineno} in step  (+1 events at 1 key(s))"
        in out
    )


def test_strict_passes_when_nothing_changed(setup, capsys):
    loaded, folder, dh = setup
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False, tier=STRICT)
    assert not res.failed and not res.suites[0].differences
    assert "gate nonspec: ok" in capsys.readouterr().out


def test_strict_fails_when_a_cell_now_runs(setup, capsys):
    loaded, folder, dh = setup

    def was_failing(data):
        data["outcomes"]["after/auto/4"] = "RuntimeError in step (tests/support/runner_fakes.py)"

    _edit_baseline(folder, was_failing)
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert not res.failed and res.suites[0].differences == [
        "cell after/auto/4 now runs (baseline: RuntimeError in step (tests/support/runner_fakes.py))"
    ]
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False, tier=STRICT)
    assert res.failed


def test_strict_fails_when_syncs_move_to_another_site(setup):
    loaded, folder, dh = setup

    def other_function(data):
        events = _eager_max_entry(data)["events"]
        ((sig, n),) = events.items()
        events.clear()
        events[sig.replace(" in step ", " in elsewhere ")] = n

    _edit_baseline(folder, other_function)
    assert not run_gate(loaded, folder, dh, fake_builder, show_progress=False).failed
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False, tier=STRICT)
    assert res.failed and "at other sites" in res.suites[0].differences[0]


def test_baseline_of_a_scenario_that_is_gone_is_stale(setup):
    loaded, folder, dh = setup
    (folder / "gone.json").write_text((folder / "nonspec.json").read_text())
    with pytest.raises(InputError) as ei:
        run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert "gone.json" in str(ei.value) and "stale baseline: no gated scenario 'gone'" in str(
        ei.value
    )


def _shift_lines(location: str, by: int) -> str:
    file, line = location.rsplit(":", 1)
    return f"{file}:{int(line) + by}"


def test_moved_code_leaves_the_baseline_unchanged(setup):
    """Line numbers move with every edit above a sync site; the baseline file must not."""
    loaded, folder, dh = setup
    sc = loaded[0].scenario
    rows = run_count_pass(sc, dh.device, fake_builder, show_progress=False)
    moved = PassRows(**{t: list(getattr(rows, t)) for t in ("counts", "latency", "findings")})
    moved.stacks = rows.stacks
    loc = COLUMNS["syncs"].index("location")
    moved.syncs = [(*r[:loc], _shift_lines(r[loc], 7), *r[loc + 1 :]) for r in rows.syncs]
    loc = COLUMNS["outcomes"].index("location")
    moved.outcomes = [
        (*r[:loc], _shift_lines(r[loc], 7) if r[loc] else "", *r[loc + 1 :]) for r in rows.outcomes
    ]
    assert moved.syncs != rows.syncs and any(r[loc] for r in moved.outcomes)
    assert to_json(loaded[0], observe(moved), "emu") == to_json(loaded[0], observe(rows), "emu")
    text = (folder / "nonspec.json").read_text()
    assert not re.search(r"\.py:\d", text)
