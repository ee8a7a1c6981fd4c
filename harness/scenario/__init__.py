"""Scenario files: the schema (common keys and the registered worlds' sections), loading,
`--set` overrides."""

from harness.scenario.loader import (
    SCENARIO_DIR,
    LoadedScenario,
    known_scenarios,
    load_scenario,
    parse_override,
    scenario_names,
)
from harness.scenario.schema import Scenario, ScenarioPart, StepsConfig

__all__ = [
    "SCENARIO_DIR",
    "LoadedScenario",
    "Scenario",
    "ScenarioPart",
    "StepsConfig",
    "known_scenarios",
    "load_scenario",
    "parse_override",
    "scenario_names",
]
