"""CI's sync gate: every gated scenario's count pass against results/baselines/, strict.

`make test` runs the gate here, on the session's count passes that the fidelity tests read
too, so each configuration is counted once. Strict: any difference fails, fewer syncs too, so
a detector that goes blind cannot pass.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.gate.baseline import DEFAULT_DIR
from harness.gate.run import chosen_scenarios, run_gate
from harness.runner.device import open_device
from harness.scenario.loader import REPO_ROOT
from syncledger.snapshot_verdict import Tier, Verdict

BASELINES = REPO_ROOT / DEFAULT_DIR


def ci_gate(count_passes, folder: Path = BASELINES) -> Verdict:
    """The gate as CI runs it: every gated scenario, strict, on the emulated device."""
    with open_device("emu") as dh:
        return run_gate(
            chosen_scenarios(None), folder, dh, tier=Tier(strict=True), count=count_passes
        )


@pytest.mark.slow
def test_every_scenario_counts_what_its_baseline_says(count_passes, capsys):
    verdict = ci_gate(count_passes)
    report = capsys.readouterr().out
    assert {s.name for s in verdict.suites} == {p.stem for p in BASELINES.glob("*.json")}
    assert [s.name for s in verdict.suites if verdict.suite_status(s) != "passed"] == [], report


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
