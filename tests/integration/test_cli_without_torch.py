"""Where only the results' readers are installed: `python -m harness report` and `compare` run
without torch, the summary of a run prints and every scenario (with `--set` overrides)
validates without torch or matplotlib, and `--help` lists every command. In fresh interpreters
whose imports of the blocked packages fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.report_fixtures import write_run

REPO = Path(__file__).resolve().parents[2]
BLOCKER = """\
import sys


class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not installed here)")
        return None


sys.meta_path.insert(0, Blocked())
"""


def _python(code: str, blocked: set[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    script = BLOCKER.format(blocked=sorted(blocked)) + code
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_report_compare_and_help_run_without_torch(tmp_path) -> None:
    run = write_run(tmp_path / "runs", "eagle", batch_sizes=(1,), steps=2)
    code = (
        "from harness.cli import main\n"
        f"assert main(['report', {str(run)!r}, '--out', 'plots']) == 0\n"
        f"assert main(['compare', {str(run)!r}, {str(run)!r}]) == 0\n"
        "assert 'torch' not in sys.modules\n"
        "main(['--help'])\n"
    )
    done = _python(code, {"torch"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.suffix for p in (tmp_path / "plots").iterdir()) == [".png"] * 8
    assert "Each cell, B against A" in done.stdout
    for command in ("bench", "compare", "gate", "report", "trace"):
        assert command in done.stdout.rsplit("usage:", 1)[-1]


# the real programs are torch code, registered where they are defined: their world's scenario
# names them, so validating it imports them
TORCH_SCENARIOS = {"real_programs.yaml"}


def test_a_summary_and_the_scenarios_run_without_torch_or_matplotlib(tmp_path) -> None:
    run = write_run(tmp_path / "runs", "eagle", batch_sizes=(1,), steps=2)
    scenarios = sorted(
        str(p) for p in (REPO / "scenarios").rglob("*.yaml") if p.name not in TORCH_SCENARIOS
    )
    code = (
        "from harness.results.summary import format_summary\n"
        f"print(format_summary({str(run)!r}))\n"
        "from harness.scenario import load_scenario\n"
        f"for path in {scenarios!r}:\n"
        "    load_scenario(path)\n"
        "s = load_scenario('nonspec', overrides=['serving.batch_sizes=[2]', 'steps.count=3'])\n"
        "print('scenarios ok', s.scenario.steps.count)\n"
    )
    done = _python(code, {"torch", "matplotlib"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Syncs per measured step" in done.stdout and "Each variant against before" in done.stdout
    assert "scenarios ok 3" in done.stdout
