"""The gate with a stand-in world: pass, more syncs (exit 1, naming the line), fewer, bad baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import runner_fakes
from runner_fakes import FakeWorld, fake_builder

from harness.errors import InputError
from harness.gate.run import run_gate, write_baselines
from harness.runner.device import open_device
from harness.scenario import load_scenario

SETS = [
    "variants=[before, after]",
    "serving_mode=specv2",
    "mirror=[auto, absent]",
    "batch_sizes=[4, 32]",
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
    assert data["outcomes"]["before/absent/4"].startswith("AssertionError at ")
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
    assert not any(r.failed for r in res)
    assert "gate nonspec: ok" in capsys.readouterr().out


def test_gate_fails_on_planted_sync_and_names_line(setup, capsys, monkeypatch):
    loaded, folder, dh = setup
    monkeypatch.setattr(FakeWorld, "extra_sync", True)
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert res[0].failed
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
    assert not res[0].failed and res[0].tightenings
    assert "can be tightened" in capsys.readouterr().out


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
    assert res[0].failed
    out = capsys.readouterr().out
    assert "cell after/auto/4 now fails: RuntimeError at tests/runner_fakes.py:" in out


def test_time_pass_keys_do_not_stale_the_baseline(setup):
    _, folder, dh = setup
    loaded = [load_scenario("nonspec", [*SETS, "steps.time=7", "steps.time_emu=3"])]
    res = run_gate(loaded, folder, dh, fake_builder, show_progress=False)
    assert not res[0].failed
