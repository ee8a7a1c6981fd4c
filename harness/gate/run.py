"""The gate and the baseline writer: count passes of the chosen scenarios vs results/baselines/."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.errors import InputError
from harness.gate.baseline import (
    Baseline,
    config_sha256,
    load_baseline,
    observe,
    to_json,
    write_baseline,
)
from harness.gate.compare import GateResult, compare, format_result
from harness.runner.cells import WorldBuilder, build_serving_world
from harness.runner.count_pass import run_count_pass
from harness.runner.device import DeviceHandle
from harness.scenario import LoadedScenario, load_scenario, scenario_names


def chosen_scenarios(names: list[str] | None) -> list[LoadedScenario]:
    """The scenarios to gate (default: every scenarios/*.yaml), validated before any run."""
    return [load_scenario(n) for n in (names or scenario_names())]


def load_baselines(loaded: list[LoadedScenario], folder: Path) -> list[Baseline]:
    """Every baseline, checked up front: missing, malformed or stale is exit 2 before any run."""
    out = []
    for ls in loaded:
        base = load_baseline(folder / f"{ls.name}.json")
        if base.data["config_sha256"] != config_sha256(ls):
            raise InputError(
                "stale baseline: the scenario's configuration changed since it was made; "
                "rerun `python -m harness baseline --device emu` and commit it",
                file=str(base.path),
                key="config_sha256",
            )
        out.append(base)
    return out


def run_gate(
    loaded: list[LoadedScenario],
    folder: Path,
    dh: DeviceHandle,
    builder: WorldBuilder = build_serving_world,
    show_progress: bool | None = None,
) -> list[GateResult]:
    baselines = load_baselines(loaded, folder)
    results = []
    for ls, base in zip(loaded, baselines):
        obs = observe(run_count_pass(ls.scenario, dh.device, builder, show_progress))
        res = compare(ls, obs, base, measured_only=dh.kind != base.data.get("device"))
        results.append(res)
        print(format_result(res, str(base.path)), flush=True)
    if dh.kind != base_device(baselines):
        print(
            f"note: baselines were made on {base_device(baselines)}, gated on {dh.kind}",
            file=sys.stderr,
        )
    return results


def base_device(baselines: list[Baseline]) -> str:
    return ",".join(sorted({str(b.data.get("device")) for b in baselines}))


def write_baselines(
    loaded: list[LoadedScenario],
    folder: Path,
    dh: DeviceHandle,
    builder: WorldBuilder = build_serving_world,
    show_progress: bool | None = None,
) -> list[Path]:
    paths = []
    for ls in loaded:
        obs = observe(run_count_pass(ls.scenario, dh.device, builder, show_progress))
        path = folder / f"{ls.name}.json"
        write_baseline(path, to_json(ls, obs, dh.kind))
        total = sum(obs.counts.values())
        failed = sum(1 for v in obs.outcomes.values() if v != "ok")
        print(f"baseline {path}: {len(obs.counts)} keys, {total} syncs, {failed} failing cell(s)")
        paths.append(path)
    return paths
