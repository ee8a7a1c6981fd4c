"""What `make` promises: CI's gate is strict (`make test` runs the whole suite, whose
tests/integration/test_gate_strict.py gates every scenario strictly), and `make gate`'s exit status is as
docs/gate.md says (make exits 2 for any failed recipe and names the gate's own code)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from tests.support.tiny import tiny_scenario

REPO = Path(__file__).resolve().parents[2]
TINY = tiny_scenario()

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _make(*args: str) -> subprocess.CompletedProcess:
    # a top-level make, as a user runs it (not a sub-make of `make test`)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(
        ["make", "--no-print-directory", *args, f"PYTHON={sys.executable}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ci_runs_the_whole_suite_with_its_strict_gate():
    dry = _make("-n", "test")
    assert dry.returncode == 0, dry.stderr
    (line,) = [x for x in dry.stdout.splitlines() if " -m pytest" in x]
    # the xdist flags come out of a $(...), so "-x)" is -x
    args = re.split(r"[\s;()]+", line.split(" -m pytest", 1)[1])
    # no selection: pyproject's testpaths, every test, tests/integration/test_gate_strict.py included
    selecting = ("-k", "-m", "--deselect", "--ignore", "--ignore-glob", "--lf", "-x", "tests")
    assert not [a for a in args if a.split("=")[0] in selecting or a.startswith("tests/")], line
    assert (REPO / "tests" / "integration" / "test_gate_strict.py").is_file()


@pytest.mark.slow
def test_make_gate_exit_status_is_as_documented(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    args = ["--baselines", str(tmp_path), "--scenarios", str(scenario), "--no-progress"]
    assert main(["baseline", *args, "--device", "emu"]) == 0
    path = tmp_path / "tiny.json"
    data = json.loads(path.read_text())
    entry = next(c for c in data["counts"] if c["syncs"] > 0)
    entry["syncs"] -= 1  # the code now makes one sync more than this baseline allows
    path.write_text(json.dumps(data))
    make_args = f"ARGS={' '.join(args)}"
    done = _make("gate", make_args)
    assert done.returncode == 2, done.stderr  # make's own code for a failed recipe
    assert re.search(r"make: \*\*\* \[Makefile:\d+: gate\] Error 1$", done.stderr.strip())
    path.write_text("{not json")
    done = _make("gate", make_args)
    assert done.returncode == 2
    assert re.search(r"make: \*\*\* \[Makefile:\d+: gate\] Error 2$", done.stderr.strip())
    page = " ".join((REPO / "docs" / "gate.md").read_text().split())
    assert "make: *** [Makefile:NN: gate] Error 1" in page
    assert "`make` itself exits 2" in page


@pytest.mark.parametrize(
    ("target", "variable", "option"),
    [
        ("report", "RUN", None),
        ("trace", "RUN", None),
        ("notebooks", "RUN", None),
        ("bench", "SCENARIO", "--scenario"),
        ("gate", "GATE_DEVICE", "--device"),
    ],
)
def test_values_with_spaces_quotes_and_non_ascii_reach_the_command_as_one_word(
    target, variable, option
):
    """What the shell makes of each recipe line (`make -n`, split as a POSIX shell splits):
    the value is one argument, whatever it holds."""
    value = "results/ü dir/it's a run"
    done = _make("-n", target, f"{variable}={value}", "ARGS=--extra 'two words'")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if "-m harness" in x)
    argv = shlex.split(line)
    at = argv.index(value)  # ValueError where the shell would split it
    assert argv[at - 1] == (option or target)
    assert argv[-2:] == ["--extra", "two words"]  # ARGS still split into its arguments


def test_an_empty_run_is_no_argument():
    """`make report` without RUN: the newest complete run, so no (empty) argument at all."""
    line = next(x for x in _make("-n", "report").stdout.splitlines() if "-m harness" in x)
    assert shlex.split(line)[-1] == "report"
