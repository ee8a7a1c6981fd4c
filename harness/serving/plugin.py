"""The serving world as a plugin (harness.registry): its scenario section `serving`, its cells
(variant x mirror setting x batch size) and their worlds, its summary and vocabulary, its
figures."""

from __future__ import annotations

from harness.registry import WorldPlugin, register_world
from harness.report.figures import FigureSpec, ReportPart, as_they_are
from harness.results.vocabulary import ResultsPart
from harness.runner.cells import RunnerPart
from harness.scenario.schema import ScenarioPart
from harness.serving.cells import (
    build_serving_world,
    check_serving_cell,
    serving_cells,
    serving_footprint,
)
from harness.serving.section import SECTION, ServingConfig
from harness.serving.summary import serving_summary
from harness.serving.vocabulary import serving_vocabulary


def figures() -> dict[str, FigureSpec]:
    from harness.serving.figures import FIGURES

    return FIGURES


PLUGIN = register_world(
    WorldPlugin(
        "serving",
        (
            ScenarioPart(sections={SECTION: ServingConfig}),
            RunnerPart(serving_cells, build_serving_world, check_serving_cell, serving_footprint),
            ResultsPart(serving_summary, serving_vocabulary),
            ReportPart(figures, serving_view=as_they_are),
        ),
    )
)
