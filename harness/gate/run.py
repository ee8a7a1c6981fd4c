"""The gate and the baseline writer: count passes of the chosen scenarios vs results/baselines/."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from harness.errors import InputError, Interrupted, stop_signal
from harness.gate.baseline import (
    Baseline,
    baseline_path,
    config_sha256,
    load_baseline,
    observe,
    to_json,
    write_baseline,
)
from harness.gate.compare import REMAKE, compare
from harness.results.run_folder import INCOMPLETE_MARKER
from harness.runner.cells import WorldBuilder, build_scenario_world, runner_part
from harness.runner.count_pass import PassRows, run_count_pass
from harness.runner.device import DeviceHandle
from harness.scenario import LoadedScenario, load_scenario, scenario_names
from harness.scenario.loader import display_path
from syncledger.snapshot_verdict import Tier, Verdict, suite_text

TOOL = "harness gate"


def chosen_scenarios(names: list[str] | None) -> list[LoadedScenario]:
    """The scenarios to gate (default: every scenarios/*.yaml whose world is gated), validated
    before any run. A world that runs its cells in processes of its own (DP attention: its
    per-rank counts are checked by tests/integration/test_dp_run.py), or whose syncs another check
    answers (the real programs: their suite), is not gated."""
    if not names:
        every = [load_scenario(n) for n in scenario_names()]
        return [ls for ls in every if runner_part(ls.scenario).gated]
    loaded = [load_scenario(n) for n in names]
    for ls in loaded:
        if not runner_part(ls.scenario).gated:
            raise InputError(
                f"a scenario of the {ls.scenario.world} world, which the gate does not count",
                file=display_path(ls.path),
                key=ls.scenario.world,
            )
    return loaded


def load_baselines(loaded: list[LoadedScenario], folder: Path) -> list[Baseline]:
    """Every baseline, checked up front: missing, malformed or stale is exit 2 before any run."""
    check_no_orphans(loaded, folder)
    out = []
    for ls in loaded:
        base = load_baseline(baseline_path(folder, ls.name))
        if base.data["config_sha256"] != config_sha256(ls):
            raise InputError(
                "stale baseline: the scenario's configuration changed since it was made; "
                f"rerun `{REMAKE}` and commit it",
                file=str(base.path),
                key="config_sha256",
            )
        out.append(base)
    return out


def check_no_orphans(loaded: list[LoadedScenario], folder: Path) -> None:
    """A baseline whose scenario is gone would never be checked again: stale (exit 2). A run
    folder or a file given for the baselines folder is named as such."""
    known = set(scenario_names()) | {ls.name for ls in loaded}
    if folder.is_file():
        raise InputError(
            "a file, not a folder of <scenario>.json baselines (e.g. results/baselines)",
            file=str(folder),
            key="--baselines",
        )
    if (folder / INCOMPLETE_MARKER).exists() or (
        (folder / "meta.json").is_file() and "meta" not in known
    ):
        raise InputError(
            "a run folder (it holds meta.json), not a baselines folder: pass the folder of "
            "<scenario>.json baselines (e.g. results/baselines)",
            file=str(folder),
            key="--baselines",
        )
    for path in sorted(folder.glob("*.json")):
        if path.stem not in known:
            raise InputError(
                f"stale baseline: no gated scenario {path.stem!r} (gated: "
                f"{', '.join(sorted(known))}); delete the file, or restore the scenario",
                file=str(path),
            )


def run_gate(
    loaded: list[LoadedScenario],
    folder: Path,
    dh: DeviceHandle,
    builder: WorldBuilder = build_scenario_world,
    show_progress: bool | None = None,
    tier: Tier | None = None,
    report: TextIO | None = None,
    count: Callable[[LoadedScenario], PassRows] | None = None,
) -> Verdict:
    """Count every scenario and compare; each scenario's report goes to `report` (default:
    stdout) as soon as it is known. `count` gives a scenario's count pass (default: run it on
    `dh` with `builder`), so the test suite can share one pass per configuration with other
    tests."""
    if count is None:

        def count(ls: LoadedScenario) -> PassRows:
            return run_count_pass(ls.scenario, dh.device, builder, show_progress)

    baselines = load_baselines(loaded, folder)
    verdict = Verdict(TOOL, tier or Tier(), [])
    for ls, base in zip(loaded, baselines):
        obs = observe(count(ls))
        measured_only = dh.kind != base.data.get("device")
        suite = compare(ls, obs, base, measured_only=measured_only)
        verdict.suites.append(suite)
        print(suite_text(verdict, suite, "gate"), file=report or sys.stdout, flush=True)
    if dh.kind != base_device(baselines):
        print(
            f"note: baselines were made on {base_device(baselines)}, gated on {dh.kind}",
            file=sys.stderr,
        )
    return verdict


def base_device(baselines: list[Baseline]) -> str:
    return ",".join(sorted({str(b.data.get("device")) for b in baselines}))


def write_baselines(
    loaded: list[LoadedScenario],
    folder: Path,
    dh: DeviceHandle,
    builder: WorldBuilder = build_scenario_world,
    show_progress: bool | None = None,
) -> list[Path]:
    paths: list[Path] = []
    try:
        for ls in loaded:
            obs = observe(run_count_pass(ls.scenario, dh.device, builder, show_progress))
            path = baseline_path(folder, ls.name)
            write_baseline(path, to_json(ls, obs, dh.kind))
            total = sum(obs.counts.values())
            failed = sum(1 for v in obs.outcomes.values() if v != "ok")
            print(
                f"baseline {path}: {len(obs.counts)} keys, {total} syncs, {failed} failing cell(s)"
            )
            paths.append(path)
    except KeyboardInterrupt as exc:
        done = ", ".join(str(p) for p in paths) or "none"
        raise Interrupted(
            f"baselines rewritten before the interrupt: {done}; the others are unchanged",
            stop_signal(exc),
        ) from None
    return paths
