"""The request lifecycle's scenario section, `lifecycle`: how requests arrive, how long their
prompts and outputs are, how the scheduler admits them and how often the SWA pool is swept;
and its rules across the `serving` section the world runs (the batch sizes are the most
requests running at once)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario import Scenario
from harness.scenario.validate import ConfigError, rule
from harness.serving.section import serving_of

SECTION = "lifecycle"
# the serving modes with a scheduler whose batches the lifecycle can change (not `direct`)
SERVING_MODES = ("nonspec", "eagle", "specv2")
# sglang's SGLANG_SWA_EVICTION_INTERVAL default (environ.py 367 at 504570f4)
UPSTREAM_EVICTION_INTERVAL = 128


@dataclass
class LifecycleConfig:
    """Requests arrive as a Poisson process (a mean per scheduler iteration); prompt and output
    lengths are drawn log-uniformly between their bounds; all from the scenario's seed."""

    arrival_rate: float = field(
        default=0.1,
        metadata=rule("mean requests arriving per scheduler iteration", min=0.001, max=64),
    )
    initial_requests: int = field(
        default=0, metadata=rule("requests waiting when the run starts", min=0, max=4096)
    )
    initial_running: int = field(
        default=0,
        metadata=rule(
            "requests already decoding when the run starts (it joins a server mid-flight, at a "
            "sweep iteration)",
            min=0,
            max=4096,
        ),
    )
    prompt_len: list[int] = field(
        default_factory=lambda: [64, 1024],
        metadata=rule("prompt tokens, [shortest, longest] (log-uniform)", min=1, max=1_048_576),
    )
    output_len: list[int] = field(
        default_factory=lambda: [32, 1024],
        metadata=rule("output tokens, [shortest, longest] (log-uniform)", min=1, max=1_048_576),
    )
    max_prefill_tokens: int = field(
        default=16384,
        metadata=rule(
            "prompt tokens one prefill batch admits at most (upstream's default)",
            min=1,
            max=1_048_576,
        ),
    )
    eviction_interval: int = field(
        default=UPSTREAM_EVICTION_INTERVAL,
        metadata=rule(
            "scheduler iterations between SWA out-of-window sweeps (SGLANG_SWA_EVICTION_INTERVAL)",
            min=1,
            max=1_000_000,
        ),
    )

    def __post_init__(self) -> None:
        for key in ("prompt_len", "output_len"):
            lo_hi = getattr(self, key)
            if len(lo_hi) != 2 or lo_hi[0] > lo_hi[1]:
                raise ConfigError(key, f"{lo_hi} must be [shortest, longest]")


def lifecycle_of(sc: Scenario) -> LifecycleConfig:
    """A scenario's `lifecycle` section."""
    return sc.section(SECTION)


def check_lifecycle(sc: Scenario) -> None:
    """The lifecycle schedules prefills itself, from a serving mode with a scheduler."""
    serving = serving_of(sc)
    if serving.serving_mode not in SERVING_MODES:
        raise ConfigError(
            "serving.serving_mode",
            f"{serving.serving_mode} has no scheduler; the lifecycle runs {', '.join(SERVING_MODES)}",
        )
    if serving.prefill_every:
        raise ConfigError(
            "serving.prefill_every", "0 with lifecycle: prefills come when requests arrive"
        )
    if lifecycle_of(sc).prompt_len[1] > lifecycle_of(sc).max_prefill_tokens:
        raise ConfigError("lifecycle.max_prefill_tokens", "below the longest prompt")
