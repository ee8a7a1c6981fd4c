"""`harness gate` for machines and pull requests, with a stand-in world: JSON with each key's
old -> new and the new sites' stacks, JUnit XML with a case per cell, Markdown (printed, and
appended to GitHub's job summary), the warn-only tier; and bad --baselines / outputs (exit 2)."""

from __future__ import annotations

import errno
import functools
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import harness.gate.run as gate_run
from harness.cli import main
from harness.gate.run import run_gate, write_baselines
from harness.runner.device import open_device
from harness.scenario import load_scenario
from tests.support import runner_fakes
from tests.support.full_disk import full_disk_for
from tests.support.runner_fakes import FakeWorld, fake_builder

SETS = [
    "serving.variants=[before, after]",
    "serving.mirror=[auto]",
    "serving.batch_sizes=[4, 32]",
    "steps={warmup: 1, count: 4}",
]


@pytest.fixture
def gate(tmp_path, monkeypatch):
    """`main(["gate", ...])` on a scenario of the stand-in world, with its baselines made."""
    loaded = [load_scenario("nonspec", SETS)]
    monkeypatch.setattr(FakeWorld, "extra_sync", False)
    monkeypatch.setattr(FakeWorld, "broken_variant", "")
    base = tmp_path / "baselines"
    with open_device("emu") as dh:
        write_baselines(loaded, base, dh, fake_builder, show_progress=False)
    monkeypatch.setattr(gate_run, "run_gate", functools.partial(run_gate, builder=fake_builder))
    monkeypatch.setattr(gate_run, "chosen_scenarios", lambda names: loaded)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)

    def run(*args: str) -> int:
        return main(["gate", "--baselines", str(base), "--no-progress", "--device", "emu", *args])

    return run, base


def planted_line() -> int:
    lines = Path(runner_fakes.__file__).read_text().splitlines()
    return next(i for i, t in enumerate(lines, 1) if "# PLANTED" in t)


def test_json_junit_and_markdown_name_the_regression(gate, tmp_path, monkeypatch, capsys):
    run, _ = gate
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setattr(FakeWorld, "extra_sync", True)
    out_json, out_xml = tmp_path / "out" / "v.json", tmp_path / "out" / "v.xml"
    assert run("--json", str(out_json), "--junit", str(out_xml), "--markdown") == 1
    captured = capsys.readouterr()
    line = planted_line()

    verdict = json.loads(out_json.read_text())
    assert (verdict["tool"], verdict["verdict"]) == ("harness gate", "failed")
    (suite,) = verdict["suites"]
    cases = {c["name"]: c for c in suite["cases"]}
    assert set(cases) == {"after/auto/4", "after/auto/32", "before/auto/4", "before/auto/32"}
    assert {c["status"] for c in cases.values()} == {"failed"}
    changes = cases["after/auto/4"]["changes"]
    assert [(c["key"], c["old"], c["new"]) for c in changes] == [
        ("DECODE path=graph region=step/metadata/out_graph", 0, 4),  # 1 per measured step
        ("DECODE path=warmup region=step/metadata/out_graph", 0, 1),
    ]
    sites = cases["after/auto/4"]["new_sites"]
    assert [s["key"] for s in sites] == [c["key"] for c in changes]
    for site in sites:
        assert site["where"] == [
            f"d2h_read item at tests/support/runner_fakes.py:{line} in planted_sync"
        ]
        assert site["stack"][0] == f"tests/support/runner_fakes.py:{line} in planted_sync"

    root = ET.parse(out_xml).getroot()
    (ts,) = root.iter("testsuite")
    assert (ts.get("name"), ts.get("tests"), ts.get("failures")) == ("nonspec", "4", "4")
    failure = {tc.get("name"): tc.find("failure") for tc in ts.iter("testcase")}["after/auto/4"]
    assert failure is not None and "0 -> 4 syncs" in failure.get("message")
    assert f"runner_fakes.py:{line} in planted_sync" in failure.text

    md = captured.out  # --markdown: stdout is the table alone, the report goes to stderr
    assert md.startswith("### harness gate: FAILED\n")
    row = "| fail | nonspec | after/auto/4 | DECODE path=graph region=step/metadata/out_graph | 0 | 4 |"
    assert row in md
    assert f"tests/support/runner_fakes.py:{line} in planted_sync" in md
    assert "gate FAILED" in captured.err and "REGRESSED" in captured.err
    assert summary.read_text() == "earlier step\n" + md


def test_warn_only_reports_and_exits_0(gate, tmp_path, monkeypatch, capsys):
    run, _ = gate
    monkeypatch.setattr(FakeWorld, "extra_sync", True)
    out_json = tmp_path / "v.json"
    assert run("--warn-only", "--json", str(out_json)) == 0
    out = capsys.readouterr().out
    assert "gate nonspec: WARN (warn-only)" in out and "would fail in nonspec" in out
    verdict = json.loads(out_json.read_text())
    assert (verdict["verdict"], verdict["status"]) == ("passed", "warned")


def test_unchanged_passes_with_a_summary_row(gate, tmp_path, capsys):
    run, _ = gate
    out_xml = tmp_path / "v.xml"
    assert run("--strict", "--junit", str(out_xml), "--markdown") == 0
    md = capsys.readouterr().out
    assert md.startswith("### harness gate: passed (strict)")
    assert "| nonspec | " in md and "| 4 | " in md and "| passed |" in md
    root = ET.parse(out_xml).getroot()
    assert root.get("failures") == "0" and len(list(root.iter("testcase"))) == 4


def test_an_unwritable_output_is_exit_2_before_any_count(gate, tmp_path, capsys, monkeypatch):
    run, _ = gate
    monkeypatch.setattr(gate_run, "run_gate", None)  # must not be reached
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert run("--json", str(blocker / "v.json")) == 2
    assert "--json: cannot write" in capsys.readouterr().err
    assert run("--junit", str(tmp_path)) == 2
    assert "--junit: is a folder, not a file" in capsys.readouterr().err


def test_an_output_on_a_baseline_or_another_output_is_refused_before_any_count(
    gate, tmp_path, capsys, monkeypatch
):
    run, base = gate
    monkeypatch.setattr(gate_run, "run_gate", None)  # must not be reached
    baseline = base / "nonspec.json"
    kept = baseline.read_bytes()
    assert run("--json", str(baseline)) == 2
    err = capsys.readouterr().err
    assert f"{baseline}: --json: is an input of this command (--baselines)" in err
    assert run("--json", str(tmp_path / "v"), "--junit", str(tmp_path / "v")) == 2
    assert "--junit: is the output of --json too" in capsys.readouterr().err
    assert baseline.read_bytes() == kept and not (tmp_path / "v").exists()


def test_a_full_disk_while_writing_the_junit_is_exit_3_naming_it(
    gate, tmp_path, capsys, monkeypatch
):
    """The README's promise: a full disk is exit 3, whichever output meets it."""
    run, _ = gate
    full_disk_for(monkeypatch, "v.xml")
    out = tmp_path / "v.xml"
    assert run("--junit", str(out)) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: {out}: {os.strerror(errno.ENOSPC)}"
    assert not out.exists() and not list(tmp_path.glob(".v.xml.*"))


def test_a_run_folder_for_baselines_is_named_as_such(gate, tmp_path, capsys):
    folder = tmp_path / "runs" / "nonspec" / "20250101T000000Z-abcd"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text("{}")
    assert main(["gate", "--baselines", str(folder), "--device", "emu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {folder}: --baselines: a run folder (it holds meta.json), not a baselines "
        "folder: pass the folder of <scenario>.json baselines (e.g. results/baselines)"
    ]
    assert "delete" not in err[0]


@pytest.mark.parametrize("duplicate", ["json_key", "entry"])
def test_a_duplicated_key_in_a_baseline_is_exit_2(gate, capsys, duplicate):
    run, base = gate
    path = base / "nonspec.json"
    data = json.loads(path.read_text())
    n = len(data["counts"])
    if duplicate == "entry":
        data["counts"].append(dict(data["counts"][0]))
        text = json.dumps(data)
    else:  # the same key twice in one object: json.loads alone keeps the second silently
        text = json.dumps(data).replace('"seed": ', '"seed": 1, "seed": ', 1)
    path.write_text(text)
    assert run() == 2
    expected = {
        "json_key": f"error: {path}: seed: given twice in one object",
        "entry": f"error: {path}: counts[{n}]: malformed entry (a second entry for key",
    }[duplicate]
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(expected)
