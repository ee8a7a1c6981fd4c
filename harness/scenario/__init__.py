"""Scenario files: schema, loading, `--set` overrides."""

from harness.scenario.loader import (
    SCENARIO_DIR,
    LoadedScenario,
    known_scenarios,
    load_scenario,
    parse_override,
    scenario_names,
)
from harness.scenario.schema import Scenario, SpecConfig, StepsConfig

__all__ = [
    "SCENARIO_DIR",
    "LoadedScenario",
    "Scenario",
    "SpecConfig",
    "StepsConfig",
    "known_scenarios",
    "load_scenario",
    "parse_override",
    "scenario_names",
]
