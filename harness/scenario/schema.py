"""The scenario schema: the keys every scenario has, and the sections of its world.

A scenario file holds `name`, `description`, `seed` and `steps`, and the sections of one world:
`serving` (the serving world), `serving` and `dp` (DP attention), `sync_cost`, `programs`, ...
Each world registers the sections it owns (`ScenarioPart`, harness.registry): a dataclass each,
validated by the generic validator (harness.scenario.validate) with its own defaults, and the
rules across its sections. This module knows no world: which world runs a scenario is the one
whose sections it holds.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness import registry
from harness.scenario.validate import (
    ConfigError,
    Source,
    fail,
    field_names,
    from_mapping,
    rule,
    type_at,
    unknown_key,
    unwrap_optional,
)


@dataclass
class StepsConfig:
    """How many steps each cell runs after warm-up and capture."""

    warmup: int = field(default=2, metadata=rule("unmeasured steps first", min=0, max=10_000))
    count: int = field(default=16, metadata=rule("measured steps, count pass", min=1, max=100_000))
    time: int = field(default=200, metadata=rule("measured steps, time pass", min=1, max=100_000))
    # host times on the CPU say little, and 200 steps of every cell take minutes there
    time_emu: int = field(
        default=20,
        metadata=rule("measured steps, time pass on the emulated device", min=1, max=100_000),
    )

    # steps with the device tracer on, in rounds of their own among the others (where a device
    # tracer exists: CUDA with cupti-python); kept apart from the time pass's other steps
    trace: int = field(
        default=10,
        metadata=rule("traced steps per cell, time pass (device tracer on)", min=0, max=100_000),
    )
    # the time pass interleaves cells: rounds of this many steps per cell, in shuffled order
    round_steps: int = field(
        default=5,
        metadata=rule("measured steps per cell in each round of the time pass", min=1, max=10_000),
    )

    def time_steps(self, device_kind: str) -> int:
        return self.time if device_kind == "cuda" else self.time_emu


@dataclass
class CommonKeys:
    """The keys of every scenario, whatever its world."""

    name: str = field(default="", metadata=rule("scenario name (default: the file's stem)"))
    description: str = field(default="", metadata=rule("one line for humans"))
    seed: int = field(default=0, metadata=rule("seed of the world", min=0, max=2**31 - 1))
    steps: StepsConfig = field(default_factory=StepsConfig, metadata=rule("step counts"))


@dataclass
class Scenario:
    """One validated scenario: the common keys, its world, and that world's sections."""

    name: str
    description: str
    seed: int
    steps: StepsConfig
    world: str  # the registered world that runs it
    sections: dict[str, Any]  # section key -> its dataclass (the world's and those it uses)

    def section(self, key: str) -> Any:
        return self.sections[key]


@dataclass(frozen=True)
class ScenarioPart:
    """A world's part of the scenario file: the sections it owns (key -> dataclass), the
    sections of other worlds its scenarios hold too (DP attention runs serving worlds), and
    its rules across them (`check` raises ConfigError at a dotted key)."""

    sections: dict[str, type]
    uses: tuple[str, ...] = ()
    check: Callable[[Scenario], None] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The sections a scenario of this world holds: exactly these."""
        return (*self.uses, *self.sections)


COMMON = tuple(field_names(CommonKeys))


def scenario_parts() -> dict[str, ScenarioPart]:
    return registry.parts(ScenarioPart)


def section_classes() -> dict[str, type]:
    """Every registered section: key -> its dataclass."""
    return {key: cls for part in scenario_parts().values() for key, cls in part.sections.items()}


def _section_hints(key: str, sections: dict[str, type]) -> list[str]:
    """`serving.mirror` for a section's key written at the top level."""
    return [f"{name}.{key}" for name, cls in sections.items() if key in field_names(cls)]


def world_of(present: list[str], src: Source) -> str:
    """The world whose sections are exactly those present (exit 2 otherwise)."""
    parts = scenario_parts()
    for name, part in parts.items():
        if set(part.keys) == set(present):
            return name
    choices = " | ".join(" + ".join(p.keys) for p in parts.values())
    if not present:
        what = "no section of a world"
    elif len(present) == 1:
        what = f"section {present[0]} alone is not a world"
    else:
        what = f"sections {' + '.join(present)} are not one world's"
    fail(f"{what}; a scenario holds the sections of one: {choices}", src, "(top level)")


def parse_scenario(raw: dict[str, Any], src: Source) -> Scenario:
    """Build and check a scenario from its parsed (and overridden) mapping."""
    sections = section_classes()
    known = [*COMMON, *sections]
    for key in raw:
        if not isinstance(key, str) or key not in known:
            name = key if isinstance(key, str) else repr(key)
            unknown_key(name, known, src, "", _section_hints(name, sections))
    common = from_mapping(CommonKeys, {k: v for k, v in raw.items() if k in COMMON}, src)
    present = [k for k in raw if k in sections]
    world = world_of(present, src)
    built = {k: from_mapping(sections[k], raw[k], src, prefix=f"{k}.") for k in present}
    sc = Scenario(common.name, common.description, common.seed, common.steps, world, built)
    check = scenario_parts()[world].check
    if check is not None:
        try:
            check(sc)
        except ConfigError as exc:
            fail(exc.message, src, exc.key)
    return sc


def schema_type_at(dotted: str, src: Source) -> Any:
    """The declared type at a dotted key, failing (with did-you-mean) on an unknown one."""
    head, *rest = dotted.split(".")
    sections = section_classes()
    if head in sections:
        return type_at(sections[head], rest, src, f"{head}.")
    if head in COMMON:
        tp, _ = unwrap_optional(typing.get_type_hints(CommonKeys)[head])
        return type_at(tp, rest, src, f"{head}.")
    unknown_key(head, [*COMMON, *sections], src, "", _section_hints(head, sections))


def as_data(sc: Scenario) -> dict[str, Any]:
    """The scenario as plain data: the common keys, then its sections (meta.json's config)."""
    out: dict[str, Any] = {
        "name": sc.name,
        "description": sc.description,
        "seed": sc.seed,
        "steps": dataclasses.asdict(sc.steps),
    }
    out.update({key: dataclasses.asdict(value) for key, value in sc.sections.items()})
    return out
