"""CI's sync gate: every gated scenario's count pass against results/baselines/, strict.

`make test` runs the gate here, on the session's count passes that the fidelity tests read
too, so each configuration is counted once. Strict: any difference fails, fewer syncs too, so
a detector that goes blind cannot pass.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from harness.commands.gate import closing_line
from harness.gate.baseline import DEFAULT_DIR
from harness.gate.run import chosen_scenarios, run_gate
from harness.runner.device import open_device
from harness.scenario.loader import REPO_ROOT
from syncledger.snapshot_formats import markdown
from syncledger.snapshot_verdict import Tier, Verdict

BASELINES = REPO_ROOT / DEFAULT_DIR
GATE_SAMPLE = "The gate job on this commit passes; its log and job summary"
FENCE = re.compile(r"^(`{3,})\w*\n(.*?)^\1$", re.S | re.M)
TOOK = "N s on device emu"  # the page shows one run's time


def ci_gate(count_passes, folder: Path = BASELINES) -> Verdict:
    """The gate as CI runs it: every gated scenario, strict, on the emulated device."""
    with open_device("emu") as dh:
        return run_gate(
            chosen_scenarios(None), folder, dh, tier=Tier(strict=True), count=count_passes
        )


@pytest.fixture(scope="module")
def strict_gate(count_passes) -> tuple[Verdict, str]:
    """CI's gate on this commit, as `python -m harness gate --strict` runs it in the
    repository: its verdict, and the report it printed."""
    with pytest.MonkeyPatch.context() as mp:
        out = io.StringIO()
        mp.setattr(sys, "stdout", out)
        mp.chdir(REPO_ROOT)
        verdict = ci_gate(count_passes, DEFAULT_DIR)
    return verdict, out.getvalue()


@pytest.mark.slow
def test_every_scenario_counts_what_its_baseline_says(strict_gate):
    verdict, report = strict_gate
    assert {s.name for s in verdict.suites} == {p.stem for p in BASELINES.glob("*.json")}
    assert [s.name for s in verdict.suites if verdict.suite_status(s) != "passed"] == [], report


def test_the_gate_page_shows_this_gate(strict_gate):
    """docs/gate.md's sample of the gate job (its log, then its job summary) is what the gate
    prints on this commit, but for the time it took."""
    verdict, report = strict_gate
    _code, last = closing_line(verdict, True, TOOK)
    page = (REPO_ROOT / "docs" / "gate.md").read_text()
    section = page[page.index(GATE_SAMPLE) :]
    log, summary = (m[2] for m in list(FENCE.finditer(section))[:2])
    shown = re.sub(r"\(\d+\.\d s on device emu\)$", f"({TOOK})", log, flags=re.M)
    assert shown == report + last + "\n", f"docs/gate.md's gate log is stale; now:\n{report}{last}"
    assert summary == markdown(verdict), (
        f"docs/gate.md's summary is stale; now:\n{markdown(verdict)}"
    )


def test_one_sync_fewer_than_the_baseline_fails_it(count_passes, tmp_path, capsys):
    """What a blinded detector looks like to the gate: fewer syncs than the baseline."""
    folder = tmp_path / "baselines"
    shutil.copytree(BASELINES, folder)
    path = folder / "nonspec.json"
    data = json.loads(path.read_text())
    entry = next(c for c in data["counts"] if c["syncs"] > 0)
    entry["syncs"] += 1  # the baseline saw one more than the code now makes
    path.write_text(json.dumps(data))
    verdict = ci_gate(count_passes, folder)
    capsys.readouterr()
    suites = {s.name: s for s in verdict.suites}
    assert [n for n, s in suites.items() if verdict.suite_status(s) == "failed"] == ["nonspec"]
    assert not suites["nonspec"].regressions and len(suites["nonspec"].changes) == 1
