"""The request lifecycle as a plugin (harness.registry): its scenario section `lifecycle`
beside the `serving` section its worlds run, its cells (the serving section's; the batch size
is the most requests running at once), its summary (steady and occasional syncs) and the
serving world's figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lifecycle.section import SECTION, LifecycleConfig, check_lifecycle, lifecycle_of
from harness.lifecycle.summary import lifecycle_summary
from harness.registry import WorldPlugin, register_world
from harness.report.figures import ReportPart, as_they_are
from harness.results.vocabulary import ResultsPart
from harness.runner.cells import Cell, Problem, RunnerPart
from harness.scenario import Scenario
from harness.scenario.schema import ScenarioPart
from harness.serving import plugin as serving
from harness.serving.cells import serving_cells, serving_footprint
from harness.serving.section import SECTION as SERVING
from harness.serving.section import serving_of
from harness.serving.vocabulary import serving_vocabulary

if TYPE_CHECKING:
    import torch

    from harness.serving.world import World


def build(sc: Scenario, cell: Cell, device: torch.device) -> World:
    from harness.lifecycle.world import build_lifecycle_world

    return build_lifecycle_world(sc, cell, device)


def check_cell(sc: Scenario, cell: Cell) -> Problem | None:
    """The longest prompt and a step's writes must fit in the context."""
    from harness.serving.scheduler import min_context_len
    from harness.serving.world import WorldConfig

    serving = serving_of(sc)
    longest = lifecycle_of(sc).prompt_len[1]
    spec = WorldConfig(serving, cell.variant, cell.mirror, cell.batch_size, 0).spec
    need = min_context_len((1, longest), spec)
    if serving.context_len < need:
        return Problem(
            ("serving.context_len", "lifecycle.prompt_len"),
            f"{serving.context_len} is too small: prompts of up to {longest} tokens and a "
            f"step's writes need at least {need}",
        )
    return None


PLUGIN = register_world(
    WorldPlugin(
        "lifecycle",
        (
            ScenarioPart(
                sections={SECTION: LifecycleConfig}, uses=(SERVING,), check=check_lifecycle
            ),
            RunnerPart(serving_cells, build, check_cell, serving_footprint),
            ResultsPart(lifecycle_summary, serving_vocabulary),
            ReportPart(serving.figures, serving_view=as_they_are),
        ),
    )
)
