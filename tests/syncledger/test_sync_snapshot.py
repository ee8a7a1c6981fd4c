"""Sync snapshots (`pytest --sync-snapshot`): what the file records, what fails and what passes,
what is kept, what is stale, what each output holds, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.pytester_runs import run_inner

pytest_plugins = ["pytester"]

FILE = ".sync-snapshots.json"
PLAN_SITE = "d2h_read int in plan (ops.py)"

OPS = """
from syncledger import region

def plan(lens):
    with region("plan"):
        longest = int(lens.max())
        {extra}
    return longest
"""

TESTS = """
import os
import pytest, torch
from ops import plan

@pytest.fixture
def lens():
    return torch.tensor([3, 9, 4], device="cuda")  # set-up runs on the device too

def test_plan(lens):
    assert plan(lens) == 9

def test_quiet():
    torch.arange(3, device="cuda") + 1

@pytest.mark.skipif("SKIP_IT" in os.environ, reason="asked")
def test_skippable(lens):
    plan(lens)
"""


def write_ops(pytester: pytest.Pytester, extra: str = "pass") -> None:
    pytester.makepyfile(ops=OPS.format(extra=extra))


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    write_ops(pytester)
    pytester.makepyfile(test_x=TESTS)
    return pytester.path


def run_emu(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An inner run on the emulated device on any machine: the files and sites these tests
    read are the emulated device's."""
    return run_inner(pytester, "--sync-device", "emu", *args)


def snapshots(path: Path) -> dict:
    return json.loads((path / FILE).read_text())


def record(pytester: pytest.Pytester) -> dict:
    run_emu(pytester, "--sync-snapshot").assert_outcomes(passed=3)
    return snapshots(pytester.path)


def line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_record_keeps_each_test_by_region_and_site(pytester, project):
    data = record(pytester)
    assert (data["format"], data["format_version"], data["device"]) == (
        "harness-sync-snapshots",
        1,
        "emu",
    )
    assert data["tests"] == {
        "test_x.py::test_plan": {"plan": {PLAN_SITE: 1}},
        "test_x.py::test_quiet": {},  # no sync: kept, so a first sync later is a change
        "test_x.py::test_skippable": {"plan": {PLAN_SITE: 1}},
    }
    assert not re.search(r"\.py:\d", (project / FILE).read_text())  # no line numbers


def test_grown_syncs_fail_naming_the_site_and_stack(pytester, project):
    record(pytester)
    before = (project / FILE).read_text()
    write_ops(pytester, "lens.sum().item()")
    result = run_emu(pytester, "--sync-snapshot")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    site = line_of(project / "ops.py", "        lens.sum().item()")
    call = line_of(project / "test_x.py", "    assert plan(lens) == 9")
    assert "test_x.py::test_plan region plan: 1 -> 2 syncs" in out
    assert f"d2h_read item at ops.py:{site} in plan" in out
    assert f"        test_x.py:{call} in test_plan" in out  # the stack reaches the test
    assert not re.search(r"pytest_plugin.py|pluggy/|_pytest/", out)  # the test, not the runner
    result.stdout.fnmatch_lines(
        ["FAILED test_x.py::test_plan - sync snapshot: region plan: 1 -> 2*"]
    )
    assert (project / FILE).read_text() == before  # a failing run changes nothing


def test_fewer_syncs_pass_with_a_note_and_fail_under_strict(pytester, project):
    write_ops(pytester, "lens.sum().item()")
    record(pytester)
    write_ops(pytester)
    result = run_emu(pytester, "--sync-snapshot")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*fewer syncs or other differences*can be tightened with `pytest --sync-snapshot-update`*"]
    )
    assert "test_x.py::test_plan region plan: 2 -> 1 syncs (fewer)" in result.stdout.str()
    strict = run_emu(pytester, "--sync-snapshot-strict")
    strict.assert_outcomes(passed=1, failed=2)
    strict.stdout.fnmatch_lines(["*CHANGED vs .sync-snapshots.json (strict*"])


def test_update_rewrites_only_tests_that_passed(pytester, project, monkeypatch):
    record(pytester)
    write_ops(pytester, "lens.sum().item()")
    monkeypatch.setenv("SKIP_IT", "1")
    result = run_emu(pytester, "--sync-snapshot-update", "-k", "not quiet")
    result.assert_outcomes(passed=1, skipped=1, deselected=1)
    tests = snapshots(project)["tests"]
    assert tests["test_x.py::test_plan"] == {
        "plan": {PLAN_SITE: 1, "d2h_read item in plan (ops.py)": 1}
    }
    assert tests["test_x.py::test_skippable"] == {"plan": {PLAN_SITE: 1}}  # skipped: kept
    assert tests["test_x.py::test_quiet"] == {}  # deselected: kept
    assert "stale:" not in result.stdout.str()


def test_a_failing_test_keeps_its_entry(pytester, project):
    record(pytester)
    write_ops(pytester, "lens.sum().item(); raise RuntimeError('broken')")
    run_emu(pytester, "--sync-snapshot-update").assert_outcomes(passed=1, failed=2)
    assert snapshots(project)["tests"]["test_x.py::test_plan"] == {"plan": {PLAN_SITE: 1}}


def test_a_new_test_is_recorded_and_fails_under_strict(pytester, project):
    record(pytester)
    pytester.makepyfile(test_y="def test_new():\n    pass\n")
    strict = run_emu(pytester, "--sync-snapshot-strict")
    strict.assert_outcomes(passed=3, failed=1)
    strict.stdout.fnmatch_lines(["*test_y.py::test_new: not in .sync-snapshots.json*"])
    assert "test_y.py::test_new" not in snapshots(project)["tests"]  # strict never writes
    run_emu(pytester, "--sync-snapshot").assert_outcomes(passed=4)
    assert snapshots(project)["tests"]["test_y.py::test_new"] == {}


def test_gone_tests_are_stale(pytester, project):
    record(pytester)
    other = dict(snapshots(project))
    other["tests"] = {**other["tests"], "test_gone.py::test_a": {}}  # its file is gone
    (project / FILE).write_text(json.dumps(other))
    pytester.makepyfile(test_x=TESTS.replace("def test_quiet", "def test_renamed"))

    only = run_emu(pytester, "--sync-snapshot", "test_x.py::test_plan")
    only.assert_outcomes(passed=1)  # a node id selects inside a file: the rest is not stale
    assert "test_quiet: stale" not in only.stdout.str()
    assert "test_gone.py::test_a: stale" in only.stdout.str()

    result = run_emu(pytester, "--sync-snapshot")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "test_x.py::test_quiet: stale: no longer collected" in out
    assert "test_gone.py::test_a: stale" in out
    assert "test_x.py::test_quiet" in snapshots(project)["tests"]  # reported, kept

    strict = run_emu(pytester, "--sync-snapshot-strict", "-k", "not renamed")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED  # every test passed; stale entries fail
    strict.assert_outcomes(passed=2, deselected=1)

    run_emu(pytester, "--sync-snapshot-update").assert_outcomes(passed=3)
    assert set(snapshots(project)["tests"]) == {
        "test_x.py::test_plan",
        "test_x.py::test_renamed",
        "test_x.py::test_skippable",
    }


def test_warn_only_reports_and_passes(pytester, project):
    record(pytester)
    write_ops(pytester, "lens.sum().item()")
    result = run_emu(
        pytester, "--sync-snapshot", "--sync-snapshot-warn-only", "--sync-snapshot-json", "v.json"
    )
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*WARNING vs .sync-snapshots.json (warn-only*", "*test_plan region plan: 1 -> 2 syncs"]
    )
    verdict = json.loads((project / "v.json").read_text())
    assert (verdict["verdict"], verdict["status"]) == ("passed", "warned")


def test_outputs_parse(pytester, project, monkeypatch):
    record(pytester)
    summary = project / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_ops(pytester, "lens.sum().item()")
    outs = [
        "--sync-snapshot-json",
        "v.json",
        "--sync-snapshot-junit",
        "v.xml",
        "--sync-snapshot-markdown",
        "v.md",
    ]
    run_emu(pytester, "--sync-snapshot", *outs).assert_outcomes(passed=1, failed=2)
    site = line_of(project / "ops.py", "        lens.sum().item()")

    verdict = json.loads((project / "v.json").read_text())
    assert (verdict["format"], verdict["verdict"]) == ("harness-sync-verdict", "failed")
    (suite,) = verdict["suites"]
    cases = {c["name"]: c for c in suite["cases"]}
    assert set(cases) == {
        "test_x.py::test_plan",
        "test_x.py::test_quiet",
        "test_x.py::test_skippable",
    }
    plan = cases["test_x.py::test_plan"]
    assert plan["status"] == "failed" and cases["test_x.py::test_quiet"]["status"] == "passed"
    assert [(c["key"], c["old"], c["new"]) for c in plan["changes"]] == [("region plan", 1, 2)]
    (new,) = plan["new_sites"]
    assert new["where"] == [f"d2h_read item at ops.py:{site} in plan"]
    assert new["stack"][0] == f"ops.py:{site} in plan" and "in test_plan" in new["stack"][1]

    root = ET.parse(project / "v.xml").getroot()
    cases_xml = {tc.get("name"): tc for tc in root.iter("testcase")}
    assert set(cases_xml) == {"test_plan", "test_quiet", "test_skippable"}
    assert {tc.get("classname") for tc in cases_xml.values()} == {"test_x.py"}
    failure = cases_xml["test_plan"].find("failure")
    assert failure is not None and "region plan: 1 -> 2 syncs" in failure.get("message")
    assert cases_xml["test_quiet"].find("failure") is None
    assert root.get("failures") == "2"

    md = (project / "v.md").read_text()
    assert "| fail | .sync-snapshots.json | test_x.py::test_plan | region plan | 1 | 2 |" in md
    assert f"d2h_read item at ops.py:{site} in plan" in md
    assert summary.read_text() == "earlier step\n" + md  # appended to the job summary


BAD_FILES = {
    "malformed": ("{not json", "malformed JSON"),
    "version": (
        '{"format": "harness-sync-snapshots", "format_version": 2, "device": "emu", "tests": {}}',
        "format_version: written by format version 2",
    ),
    "duplicate": (
        '{"format": "harness-sync-snapshots", "format_version": 1, "device": "emu", "tests": '
        '{"t.py::a": {}, "t.py::a": {}}}',
        "t.py::a: given twice",
    ),
    "count": (
        '{"format": "harness-sync-snapshots", "format_version": 1, "device": "emu", "tests": '
        '{"t.py::a": {"": {"site": "2"}}}}',
        "tests.t.py::a.''.site: expected a positive integer",
    ),
    "device": (
        '{"format": "harness-sync-snapshots", "format_version": 1, "device": "cuda", "tests": {}}',
        "device: recorded on device 'cuda', this run is on 'emu'",
    ),
}


@pytest.mark.parametrize("damage", sorted(BAD_FILES))
def test_a_bad_snapshot_file_is_one_line_and_exit_2(pytester, project, damage):
    text, message = BAD_FILES[damage]
    (project / FILE).write_text(text)
    result = run_emu(pytester, "--sync-snapshot")
    assert result.ret == 2
    (line,) = result.stderr.lines
    assert line.startswith(f"Exit: error: {FILE}: ") and message in line
    assert (project / FILE).read_text() == text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--sync-snapshot-file", "ops.py/snap.json"],
            "ops.py: --sync-snapshot-file: cannot write",
        ),
        (["--sync-snapshot-json", "."], ".: --sync-snapshot-json: is a folder, not a file"),
        (["--sync-snapshot-strict"], f"{FILE}: no snapshot file to check against"),
        (["--sync-snapshot-update", "--sync-snapshot-strict"], "choose one"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(pytester, project, args, message):
    result = run_emu(pytester, "--sync-snapshot", *args)
    assert result.ret == 2
    (line,) = result.stderr.lines
    assert message in line
    assert not (project / FILE).exists()


def test_an_option_without_a_mode_is_exit_2(pytester, project):
    result = run_emu(pytester, "--sync-snapshot-json", "v.json")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["*--sync-snapshot-json: takes effect only with --sync-snapshot*"])


def test_an_interrupted_session_writes_nothing(pytester, project):
    pytester.makepyfile(test_z="def test_stop():\n    raise KeyboardInterrupt\n")
    result = run_emu(pytester, "--sync-snapshot", "--sync-snapshot-json", "v.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not (project / FILE).exists() and not (project / "v.json").exists()
    result.stdout.fnmatch_lines(
        ["*the session did not finish: no snapshot file or output written*"]
    )


def test_sync_within_keeps_only_the_named_code(pytester, project):
    """The ini option scopes every entry to the code under test (here by path); the file says
    so, and a run with another scope is refused."""
    pytester.makepyfile(
        test_y="""
        import torch
        from ops import plan

        def test_checks_on_the_host():
            lens = torch.tensor([3, 9], device="cuda")
            assert plan(lens) == 9
            assert lens.tolist() == [3, 9]
        """
    )
    pytester.makeini("[pytest]\nsync_within = ops.py\n")
    result = run_emu(pytester, "--sync-snapshot")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["sync snapshots: *, counting syncs within ops.py"])
    data = snapshots(project)
    assert data["within"] == ["ops.py"]
    assert data["tests"]["test_y.py::test_checks_on_the_host"] == {"plan": {PLAN_SITE: 1}}
    pytester.makeini("[pytest]\nsync_within = test_y.py\n")
    refused = run_emu(pytester, "--sync-snapshot")
    assert refused.ret == 2
    (line,) = refused.stderr.lines
    assert (
        f"{FILE}: within: recorded within ['ops.py'], this run counts within ['test_y.py']" in line
    )
    (project / FILE).unlink()
    pytester.makeini("[pytest]\nsync_within = nosuchpkg\n")
    unknown = run_emu(pytester, "--sync-snapshot")
    assert unknown.ret == 2
    (line,) = unknown.stderr.lines
    assert "tox.ini: sync_within: 'nosuchpkg' is not an importable module or package" in line


def test_an_output_path_never_changes_the_snapshot_file(pytester, monkeypatch):
    """pytest roots a run at an existing path that follows a plugin's option as a word of its
    own (it reads such options after choosing its rootdir): the run is refused, naming the
    one-word form, which keeps the project's own file."""
    proj = pytester.mkdir("proj")
    (proj / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (proj / "ops.py").write_text(OPS.format(extra="pass"))
    (proj / "test_x.py").write_text(TESTS)
    monkeypatch.chdir(proj)
    run_emu(pytester, "--sync-snapshot", "--sync-snapshot-json", "../verdict.json")
    assert (proj / FILE).exists() and (pytester.path / "verdict.json").exists()
    for mode in ("--sync-snapshot", "--sync-snapshot-strict"):
        moved = run_emu(pytester, mode, "--sync-snapshot-json", "../verdict.json")
        assert moved.ret == 2
        moved.stderr.fnmatch_lines(
            [
                "*--sync-snapshot-json: pytest took the existing ../verdict.json for a test "
                f"path *rooted this run at {pytester.path} instead of {proj}*"
                "--sync-snapshot-json=../verdict.json"
            ]
        )
    assert not (pytester.path / FILE).exists()
    one_word = run_emu(pytester, "--sync-snapshot-strict", "--sync-snapshot-json=../verdict.json")
    one_word.assert_outcomes(passed=3)
