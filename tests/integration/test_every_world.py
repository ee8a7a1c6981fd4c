"""Generated from the registry: every registered world runs a one-step count pass of a
committed scenario on the emulated device (one cell in this process; a world that launches
processes of its own through its launch), so a new world is never left unrun."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import registry
from harness.results.load import find_runs, load_run
from harness.runner.cells import cells, runner_part
from harness.runner.count_pass import run_count_pass
from harness.runner.device import open_device
from harness.scenario import LoadedScenario, load_scenario

REPO = Path(__file__).resolve().parents[2]
ONE_STEP = ["steps.warmup=0", "steps.count=1"]


def _scenario_of(world: str) -> LoadedScenario:
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        loaded = load_scenario(str(path), overrides=ONE_STEP)
        if loaded.scenario.world == world:
            return loaded
    raise AssertionError(f"world {world!r} has no committed scenario under scenarios/")


@pytest.mark.slow
@pytest.mark.parametrize("world", list(registry.worlds()))
def test_the_world_runs_a_one_step_count_pass(world: str, tmp_path: Path) -> None:
    loaded = _scenario_of(world)
    launch = runner_part(loaded.scenario).launch
    if launch is None:
        first = cells(loaded.scenario)[:1]
        with open_device("emu") as dh:
            rows = run_count_pass(loaded.scenario, dh.device, show_progress=False, only=first)
        counted = len(rows.counts)
    else:
        assert launch(loaded, "emu", "count", tmp_path) == 0
        (run,) = find_runs(tmp_path)
        counted = len(load_run(run).counts)
    assert counted, world
