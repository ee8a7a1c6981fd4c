"""The serving world around the DeepSeek-V4 attention backend.

    from harness.serving import WorldConfig, build_world
    world = build_world(WorldConfig(serving_mode="specv2", variant="after"), device)
    world.warmup_and_capture()
    info = world.step()          # StepInfo(step, kind, passes=[ForwardPass(...), ...])
    world.findings               # [Finding(kind="stale_mirror", ...)]

Exports resolve lazily: ``harness.backend`` imports ``harness.serving.batch``, so this package
must not import the backend at import time.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "WorldConfig": "harness.serving.world",
    "World": "harness.serving.world",
    "StepInfo": "harness.serving.world",
    "ForwardPass": "harness.serving.world",
    "build_world": "harness.serving.world",
    "Finding": "harness.serving.findings",
    "SERVING_MODES": "harness.serving.modes",
    "MIRROR_PRODUCERS": "harness.serving.mirror",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'harness.serving' has no attribute {name!r}")
