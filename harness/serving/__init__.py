"""The serving world around the DeepSeek-V4 attention backend.

from harness.serving import WorldConfig, build_world
world = build_world(WorldConfig(serving_mode="specv2", variant="after"), device)
world.warmup_and_capture()
info = world.step()          # StepInfo(step, kind, passes=[ForwardPass(...), ...])
world.findings               # [Finding(kind="stale_mirror", ...)]
"""

from harness.serving.findings import Finding
from harness.serving.modes import SERVING_MODES
from harness.serving.world import ForwardPass, StepInfo, World, WorldConfig, build_world

__all__ = [
    "SERVING_MODES",
    "Finding",
    "ForwardPass",
    "StepInfo",
    "World",
    "WorldConfig",
    "build_world",
]
