"""A serving world's configuration for tests: the `serving` section's keys and one cell."""

from __future__ import annotations

from typing import Any

from harness.serving.section import ServingConfig
from harness.serving.world import WorldConfig

BEYOND = ("capture", "prompt_len", "accept_dist")  # WorldConfig's keys beyond the scenario


def world_config(
    mode: str = "nonspec",
    variant: str = "after",
    mirror: str = "auto",
    batch_size: int = 32,
    seed: int = 0,
    **keys: Any,
) -> WorldConfig:
    """`keys`: the section's (e.g. context_len, spec) and WorldConfig's beyond it."""
    beyond = {k: keys.pop(k) for k in BEYOND if k in keys}
    serving = ServingConfig(serving_mode=mode, mirror=[mirror], **keys)
    return WorldConfig(serving, variant, mirror, batch_size, seed, **beyond)
