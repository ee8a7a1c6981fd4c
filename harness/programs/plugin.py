"""The real programs as a world (harness.registry): its scenario section `programs`, one cell
per program (its name in the `case` column), the program's step as the world's step, and a
summary of its syncs per step and step time.

Not gated: what the programs' syncs must be is the suite's expectation
(harness/programs/expected_syncs.json, per site, checked against the CUDA driver on a GPU);
a baseline beside it would be a second copy of the same answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.programs.section import SECTION, ProgramsConfig
from harness.programs.summary import programs_summary
from harness.registry import WorldPlugin, register_world
from harness.results.vocabulary import ResultsPart
from harness.runner.cells import Cell, RunnerPart
from harness.scenario import Scenario
from harness.scenario.schema import ScenarioPart

if TYPE_CHECKING:
    import torch

    from harness.programs.world import ProgramWorld


def program_cells(sc: Scenario) -> list[Cell]:
    cfg: ProgramsConfig = sc.section(SECTION)
    return [Cell(case=name) for name in cfg.names]


def build(sc: Scenario, cell: Cell, device: torch.device) -> ProgramWorld:
    from harness.programs.world import build_program_world

    return build_program_world(sc, cell, device)


PLUGIN = register_world(
    WorldPlugin(
        "programs",
        (
            ScenarioPart(sections={SECTION: ProgramsConfig}),
            RunnerPart(program_cells, build, gated=False),
            ResultsPart(programs_summary),
        ),
    )
)
