"""Cells of a scenario and the worlds that run them: the runner's part of a world.

A cell is one point of a scenario's sweeps. What it sweeps is up to the scenario's world
(harness.registry): the serving world sweeps backend variants, mirror settings and batch
sizes; the sync-cost experiment, DP attention and the real programs name their own cases.
Each world registers a `RunnerPart`: how its cells are enumerated, how one becomes a world the
passes drive, and what the runner checks before any pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness import registry
from harness.scenario import LoadedScenario, Scenario

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Cell:
    """One cell: the world's own case (a sync-cost case, a DP cell, a program; "" in the
    serving world), and the backend variant, mirror setting and batch size where the world has
    them ("" and 0 where it has none). Each is a column of every result table, with one
    meaning in every world."""

    case: str = ""
    variant: str = ""
    mirror: str = ""
    batch_size: int = 0
    arm: str = ""  # AA_ARM: the time pass's second, independently built reference cell

    def label(self) -> str:
        parts = [
            self.case,
            self.variant,
            self.mirror and f"mirror={self.mirror}",
            self.batch_size and f"bs={self.batch_size}",
            self.arm and f"arm={self.arm}",
        ]
        return "/".join(p for p in parts if p)

    def key(self, scenario: str, rank: int = 0) -> tuple:
        """The cell's columns of a result row (harness.results.tables.CELL_KEYS)."""
        return (scenario, self.case, self.variant, self.mirror, self.batch_size, rank, self.arm)


class World(Protocol):
    """What the runner needs of a world (a `decode_mirror` attribute, "present" / "absent",
    is recorded where the world has one)."""

    findings: list[Any]

    def warmup_and_capture(self) -> None: ...
    def step(self) -> Any: ...


WorldBuilder = Callable[[Scenario, Cell, "torch.device"], World]


@dataclass(frozen=True)
class Problem:
    """Why a cell cannot run: the scenario keys at fault and what is wrong with them."""

    keys: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class Footprint:
    """Memory a cell's world holds at least, and the keys that size it."""

    host_bytes: int
    device_bytes: int  # on the emulated device, host memory too
    keys: tuple[str, ...]


def _no_problem(sc: Scenario, cell: Cell) -> Problem | None:
    return None


def _no_footprint(sc: Scenario, cell: Cell) -> Footprint | None:
    return None


# A world that runs a bench its own way (DP attention: rank processes): the scenario, --device,
# --pass (None: the default) and the runs root; returns the exit code.
Launch = Callable[[LoadedScenario, str, "str | None", Path], int]


@dataclass(frozen=True)
class RunnerPart:
    """A world's part of the runner: how a scenario's cells are enumerated, how one cell
    becomes a world, and what the runner checks before any pass: rules across keys a cell's
    world cannot run with, and the memory it needs (harness.runner.preflight).

    `launch`: the world runs its cells its own way, in processes of its own (its `build` is
    then None); such a world is not counted by the CI gate, nor is one that sets `gated`
    False."""

    cells: Callable[[Scenario], list[Cell]]
    build: WorldBuilder | None
    check: Callable[[Scenario, Cell], Problem | None] = _no_problem
    footprint: Callable[[Scenario, Cell], Footprint | None] = _no_footprint
    launch: Launch | None = None
    gated: bool = True


def runner_part(sc: Scenario) -> RunnerPart:
    part = registry.world(sc.world).part(RunnerPart)
    if part is None:
        raise RuntimeError(f"world {sc.world!r} registers no runner part")
    return part


def cells(sc: Scenario) -> list[Cell]:
    """The scenario's cells, in the order its world enumerates them."""
    return runner_part(sc).cells(sc)


def build_scenario_world(sc: Scenario, cell: Cell, device: torch.device) -> World:
    """The world of the scenario's kind for one cell."""
    build = runner_part(sc).build
    if build is None:
        raise RuntimeError(f"world {sc.world!r} runs its cells itself (its launch)")
    return build(sc, cell, device)
