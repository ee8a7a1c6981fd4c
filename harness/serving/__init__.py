"""The serving world around the DeepSeek-V4 attention backend, and its plugin (``plugin``).

from harness.serving.section import ServingConfig
from harness.serving.world import WorldConfig, build_world
cfg = WorldConfig(ServingConfig(serving_mode="specv2"), "after", "auto", batch_size=8, seed=0)
world = build_world(cfg, device)
world.warmup_and_capture()
info = world.step()          # StepInfo(step, kind, passes=[ForwardPass(...), ...])
world.findings               # [Finding(kind="stale_mirror", ...)]

The package imports nothing itself: finding the worlds (harness.registry) imports its plugin
where torch may be absent.
"""
