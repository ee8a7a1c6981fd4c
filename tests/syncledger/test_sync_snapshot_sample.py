"""Sync snapshots on a project that is not this one (examples/tinyserve): the committed file is
current; recording it afresh gives the same file; a planted `.item()` fails the test that reaches
it, naming the site with its stack; `--sync-snapshot-update` accepts it; then all pass. (The
same project's budgets run from the ledger's wheel: tests/integration/test_adopter_wheel.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.pytester_runs import run_inner as run

pytest_plugins = ["pytester"]

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tinyserve"
SNAPSHOTS = ".sync-snapshots.json"
ANCHOR = '    with region("page_table"):\n'
PLANT = "        seq_lens.sum().item()  # planted\n"
# the committed file was recorded on the emulated device; on a machine with a GPU too
ON_EMU = ("--sync-device", "emu")


@pytest.fixture
def sample(pytester: pytest.Pytester) -> Path:
    shutil.copytree(SAMPLE, pytester.path, dirs_exist_ok=True)
    return pytester.path


def test_snapshot_cycle(pytester: pytest.Pytester, sample: Path) -> None:
    file = sample / SNAPSHOTS
    committed = file.read_text()
    run(pytester, *ON_EMU, "--sync-snapshot-strict").assert_outcomes(passed=6)

    file.unlink()
    run(pytester, *ON_EMU, "--sync-snapshot").assert_outcomes(passed=6)
    assert file.read_text() == committed  # recording is deterministic, and the file is current

    paging = sample / "tinyserve" / "paging.py"
    source = paging.read_text()
    assert source.count(ANCHOR) == 1
    paging.write_text(source.replace(ANCHOR, ANCHOR + PLANT))
    line = paging.read_text().splitlines().index(PLANT.rstrip("\n")) + 1
    tests = (sample / "tests" / "test_paging.py").read_text().splitlines()
    caller = tests.index("    table = page_table(seq_lens, free)") + 1

    failed = run(pytester, *ON_EMU, "--sync-snapshot")
    failed.assert_outcomes(passed=5, failed=1)
    out = failed.stdout.str()
    assert f"d2h_read item at tinyserve/paging.py:{line} in page_table" in out
    assert "tests/test_paging.py::test_page_table region page_table: 1 -> 2 syncs" in out
    assert f"        tinyserve/paging.py:{line} in page_table" in out  # the stack, then
    assert f"tests/test_paging.py:{caller} in test_page_table" in out  # the test's frame
    assert file.read_text() == committed  # a failing run changes nothing

    run(pytester, *ON_EMU, "--sync-snapshot-update").assert_outcomes(passed=6)
    entry = json.loads(file.read_text())["tests"]["tests/test_paging.py::test_page_table"]
    assert entry == {
        "page_table": {
            "d2h_read int in page_table (tinyserve/paging.py)": 1,
            "d2h_read item in page_table (tinyserve/paging.py)": 1,
        }
    }
    run(pytester, *ON_EMU, "--sync-snapshot-strict").assert_outcomes(passed=6)


def test_the_gate_page_shows_the_committed_file() -> None:
    readme = (SAMPLE.parents[1] / "docs" / "gate.md").read_text()
    section = readme[readme.index("The file, `.sync-snapshots.json`") :]
    shown = section[
        section.index("```json\n") + 8 : section.index("```\n", section.index("```json"))
    ]
    assert shown == (SAMPLE / SNAPSHOTS).read_text()
