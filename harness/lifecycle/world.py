"""The lifecycle's world: a serving world (harness.serving.world) whose scheduler is the
lifecycle's. Its cells are the serving section's; a cell's batch size is the most requests
running at once, and every graph bucket up to the largest is captured, since the batch passes
through them."""

from __future__ import annotations

import torch

from harness.lifecycle.scheduler import LifecycleScheduler
from harness.lifecycle.section import LifecycleConfig, lifecycle_of
from harness.runner.cells import Cell
from harness.scenario import Scenario
from harness.serving.cells import world_config
from harness.serving.section import serving_of
from harness.serving.world import World, WorldConfig, accept_config, build_world


def lifecycle_world_config(sc: Scenario, cell: Cell) -> WorldConfig:
    cfg = lifecycle_of(sc)
    prompt = (cfg.prompt_len[0], cfg.prompt_len[1])
    return world_config(serving_of(sc), cell, sc.seed, capture="all", prompt_len=prompt)


def scheduler_factory(cfg: LifecycleConfig, warmup: int):
    """The lifecycle's scheduler for a world; the run joins the server mid-flight so that its
    first measured step (after ``warmup`` steps) is a sweep iteration."""

    def make(wc: WorldConfig, pool) -> LifecycleScheduler:
        return LifecycleScheduler(
            cfg,
            max_running=wc.batch_size,
            context_len=wc.serving.context_len,
            spec=wc.spec,
            accept=accept_config(wc),
            seed=wc.seed,
            pool=pool,
            first_iteration=-warmup % cfg.eviction_interval,
        )

    return make


def build_lifecycle_world(sc: Scenario, cell: Cell, device: torch.device) -> World:
    wc = lifecycle_world_config(sc, cell)
    return build_world(wc, device, scheduler_factory(lifecycle_of(sc), sc.steps.warmup))
