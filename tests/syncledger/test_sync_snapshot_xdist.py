"""One snapshot file, many writers: xdist workers hand their parts to the controller, which
writes once; sessions that write at once keep each other's entries (a lock on the folder)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from syncledger.snapshot_file import apply_changes, load_snapshots
from syncledger.snapshot_session import Part
from syncledger.snapshot_verdict import Change, NewSite, Suite
from tests.support.pytester_runs import run_inner

pytest_plugins = ["pytester"]

TESTS = """
import pytest, torch

@pytest.mark.parametrize("n", range(4))
def test_a(n):
    torch.arange(n + 1, device="cuda").sum().item()
"""


def test_two_xdist_workers_write_one_whole_file(pytester: pytest.Pytester) -> None:
    """A real xdist run (two worker processes, ~7 s: each imports torch)."""
    pytest.importorskip("xdist")
    pytester.makepyfile(**{f"test_{i}": TESTS for i in range(3)})
    result = run_inner(
        pytester, "-p", "xdist", "-n", "2", "--sync-snapshot", "--sync-snapshot-json", "v.json"
    )
    result.assert_outcomes(passed=12)
    tests = load_snapshots(pytester.path / ".sync-snapshots.json", "f").tests
    assert len(tests) == 12
    assert set(map(json.dumps, tests.values())) == {
        json.dumps({"": {"d2h_read item in test_a (test_0.py)": 1}}),
        json.dumps({"": {"d2h_read item in test_a (test_1.py)": 1}}),
        json.dumps({"": {"d2h_read item in test_a (test_2.py)": 1}}),
    }
    (suite,) = json.loads((pytester.path / "v.json").read_text())["suites"]
    assert len(suite["cases"]) == 12  # every worker's cases reached the controller


def test_worker_parts_merge_on_the_controller() -> None:
    def part(test: str) -> Part:
        suite = Suite("f", "f", "accept", cases=[test], keys=1)
        suite.changes.append(Change(test, "region r", 1, 2, f"{test}: 1 -> 2", True))
        suite.new_sites.append(NewSite(test, "region r", "site", ("here",), 1, ("a:1 in f",)))
        return Part(suite, {test: {"r": {"site": 2}}}, {test, f"{test}-deselected"})

    controller = Part(Suite("f", "f", "accept"))
    for worker in (part("t.py::a"), part("t.py::b")):
        controller.absorb(worker.to_json())
    assert controller.suite.cases == ["t.py::a", "t.py::b"] and controller.suite.keys == 2
    assert [c.case for c in controller.suite.changes] == ["t.py::a", "t.py::b"]
    assert controller.suite.new_sites[1].stack == ("a:1 in f",)
    assert set(controller.recorded) == {"t.py::a", "t.py::b"}
    assert len(controller.collected) == 4


def test_sessions_writing_at_once_keep_each_others_entries(tmp_path: Path) -> None:
    path = tmp_path / ".sync-snapshots.json"

    def writer(w: int) -> None:
        for i in range(6):
            apply_changes(path, "f", "emu", (), {f"t.py::w{w}_{i}": {}}, set())

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(load_snapshots(path, "f").tests) == 24
