"""DP attention's scenario section, `dp`: the ranks, the exchange backends and forward
durations it sweeps, each rank's stream, a sync planted on one rank; and its rules across the
`serving` section its ranks run."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.dp.backends import EXCHANGE_BACKENDS
from harness.scenario import Scenario
from harness.scenario.validate import ConfigError, rule
from harness.serving.section import serving_of
from harness.serving.vocabulary import MIRRORS
from harness.synccost.cases import INJECTIONS
from harness.variants import variant_names

SECTION = "dp"
# where in a rank's step (regions of harness.dp.world) a planted sync can be made: before the
# exchange, or where the previous step's results are processed
INJECT_REGIONS = ("step/scheduler/prepare", "step/scheduler/process_result")


def exchange_backends() -> list[str]:
    return list(EXCHANGE_BACKENDS)


@dataclass
class RankStream:
    """One rank's requests and code under DP attention; keys left out take the scenario's."""

    batch_size: int | None = field(
        default=None, metadata=rule("requests the rank decodes", min=1, max=4096)
    )
    prefill_every: int | None = field(
        default=None,
        metadata=rule("a prefill step every N steps on this rank (0: never)", min=0, max=1_000_000),
    )
    idle: bool = field(default=False, metadata=rule("no requests: the rank runs IDLE batches"))
    variant: str | None = field(
        default=None, metadata=rule("backend variant of this rank", choices_fn=variant_names)
    )
    mirror: str | None = field(
        default=None, metadata=rule("host mirror setting of this rank", choices=MIRRORS)
    )

    def __post_init__(self) -> None:
        if self.idle and (self.batch_size is not None or self.prefill_every):
            raise ConfigError("idle", "an idle rank has no requests to size or prefill")


@dataclass
class InjectConfig:
    """A sync planted on one rank; the DP cells run without it and with it."""

    rank: int = field(default=0, metadata=rule("the rank that makes it", min=0, max=1023))
    kind: str = field(
        default="item", metadata=rule("the sync (as sync_cost's)", choices=tuple(INJECTIONS))
    )
    region: str = field(
        default="step/scheduler/prepare",
        metadata=rule("where in the rank's step", choices=INJECT_REGIONS),
    )
    count: int = field(default=1, metadata=rule("syncs per step", min=1, max=1000))


@dataclass
class DPConfig:
    """DP attention: ranks are torch.distributed processes that exchange a record every step."""

    ranks: int = field(default=2, metadata=rule("data-parallel attention ranks", min=2, max=1024))
    backend: list[str] = field(
        default_factory=lambda: ["gloo"],
        metadata=rule(
            "the exchange (a sweep): gloo (host tensors, overlap scheduler on) or nccl (device "
            "tensors, overlap scheduler off)",
            choices_fn=exchange_backends,
            nonempty=True,
        ),
    )
    forward_us: list[float] | None = field(
        default=None,
        metadata=rule(
            "stand-in forward durations, µs (a sweep: host-bound and GPU-bound); null: the "
            "serving section's forward_us",
            min=0,
            max=1e7,
            nonempty=True,
        ),
    )
    streams: list[RankStream] = field(
        default_factory=list,
        metadata=rule("per-rank streams, rank 0 first; ranks past the list take the scenario's"),
    )
    inject: InjectConfig | None = field(
        default=None, metadata=rule("a sync planted on one rank (cells without and with it)")
    )
    speculative_skip_dp_mlp_sync: bool = field(
        default=False,
        metadata=rule(
            "with speculative decoding, one exchange per decode step instead of two "
            "(upstream's --speculative-skip-dp-mlp-sync)"
        ),
    )
    timeout_s: float = field(
        default=60.0,
        metadata=rule(
            "timeout of every collective, s: a dead or stuck rank ends the run", min=1, max=3600
        ),
    )

    def __post_init__(self) -> None:
        if len(self.streams) > self.ranks:
            raise ConfigError("streams", f"{len(self.streams)} streams for {self.ranks} ranks")
        if sum(1 for s in self.streams if s.idle) == self.ranks:
            raise ConfigError("streams", "every rank is idle: no rank has work")
        if self.inject is not None and self.inject.rank >= self.ranks:
            raise ConfigError("inject.rank", f"rank {self.inject.rank} of {self.ranks} ranks")


def dp_of(sc: Scenario) -> DPConfig:
    """A scenario's `dp` section."""
    return sc.section(SECTION)


# the serving modes DP attention runs: without speculation, and the spec-v2 worker
SERVING_MODES = ("nonspec", "specv2")


def check_dp(sc: Scenario) -> None:
    """A DP scenario sweeps the exchange backend, the forward and the injection; what differs
    between ranks goes in dp.streams, so the serving section's sweeps take one value each.
    With speculative decoding every rank decodes: the speculative worker's IDLE batch (a rank
    without requests, or one that waits while another prefills) is not modelled."""
    serving = serving_of(sc)
    if serving.serving_mode not in SERVING_MODES:
        raise ConfigError(
            SECTION, f"DP attention is modelled with serving_mode {' or '.join(SERVING_MODES)}"
        )
    if serving.spec is not None:
        dp = dp_of(sc)
        if any(s.idle for s in dp.streams):
            raise ConfigError(
                "dp.streams", "an idle rank with speculative decoding is not modelled"
            )
        if serving.prefill_every or any(s.prefill_every for s in dp.streams):
            raise ConfigError(
                "serving.prefill_every", "0 on every rank with speculative decoding (decode only)"
            )
    for key in ("variants", "mirror", "batch_sizes"):
        if len(getattr(serving, key)) != 1:
            raise ConfigError(
                f"serving.{key}", "one value with dp (per-rank values go in dp.streams)"
            )
