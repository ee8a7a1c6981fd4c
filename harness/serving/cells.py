"""The serving world's cells: every (variant, mirror setting, batch size) of the `serving`
section, and the world each one builds (harness.serving.world, imported when one is built:
enumerating cells needs no torch)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from harness.runner.cells import Cell, Footprint, Problem
from harness.scenario import Scenario
from harness.serving.section import ServingConfig, serving_of

if TYPE_CHECKING:
    import torch

    from harness.serving.world import World, WorldConfig


def section_cells(serving: ServingConfig) -> list[Cell]:
    """Every combination, in a stable order (variant-major so a variant's rows sit together)."""
    return [
        Cell(variant=v, mirror=m, batch_size=b)
        for v, m, b in itertools.product(serving.variants, serving.mirror, serving.batch_sizes)
    ]


def serving_cells(sc: Scenario) -> list[Cell]:
    return section_cells(serving_of(sc))


def world_config(serving: ServingConfig, cell: Cell, seed: int, **beyond) -> WorldConfig:
    """One cell's world: the section, the cell, the seed (`beyond`: WorldConfig's keys beyond
    the scenario, e.g. the buckets DP ranks capture together)."""
    from harness.serving.world import WorldConfig

    return WorldConfig(serving, cell.variant, cell.mirror, cell.batch_size, seed, **beyond)


def build_serving_world(sc: Scenario, cell: Cell, device: torch.device) -> World:
    from harness.serving.world import build_world

    return build_world(world_config(serving_of(sc), cell, sc.seed), device)


def context_problem(serving: ServingConfig, cell: Cell) -> Problem | None:
    """A request must fit in the context: the scheduler's rule, before any world is built."""
    from harness.serving.scheduler import min_context_len

    wc = world_config(serving, cell, seed=0)
    need = min_context_len(wc.prompt_len, wc.spec)
    if serving.context_len < need:
        return Problem(
            ("serving.context_len",),
            f"{serving.context_len} is too small: arriving prompts of up to {wc.prompt_len[1]} "
            f"tokens and a step's writes need at least {need}",
        )
    return None


def check_serving_cell(sc: Scenario, cell: Cell) -> Problem | None:
    return context_problem(serving_of(sc), cell)


def pool_footprint(serving: ServingConfig, cell: Cell) -> Footprint:
    """The request pool (the bulk of a serving world): at least one row per request."""
    from harness.batch.pool import PoolConfig

    pool = PoolConfig(max_reqs=cell.batch_size, context_len=serving.context_len)
    keys = ("serving.batch_sizes", "serving.context_len")
    return Footprint(pool.host_bytes, pool.device_bytes, keys)


def serving_footprint(sc: Scenario, cell: Cell) -> Footprint:
    return pool_footprint(serving_of(sc), cell)
