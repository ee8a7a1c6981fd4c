"""The serving world's scenario section, `serving`: the model, the serving mode and its sweeps
(batch sizes, backend variants, mirror settings), CUDA graphs, the stand-in forward and EAGLE.

Validated once, here: the generic validator checks each key against its rule, and the
dataclasses check the rules across their keys when they are built (ConfigError), for a
scenario file and for a Python caller alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.schema import Scenario
from harness.scenario.validate import ConfigError, rule
from harness.serving.mode_traits import MODES, mode_names, traits_of
from harness.serving.vocabulary import MIRRORS
from harness.variants import variant_names

SECTION = "serving"
MODELS = ("flash", "pro")
KERNEL_IMPLS = ("torch", "triton")


@dataclass
class SpecConfig:
    """EAGLE settings (serving modes eagle and specv2; direct: drive EAGLE's passes)."""

    steps: int = field(default=3, metadata=rule("draft steps per verify", min=1, max=16))
    topk: int = field(default=1, metadata=rule("draft top-k (only 1 is modelled)", min=1, max=1))
    draft_tokens: int = field(default=4, metadata=rule("tokens per verify", min=2, max=32))
    accept_mean: float = field(
        default=2.8, metadata=rule("mean accept length (tokens per verify)", min=1.0, max=32.0)
    )

    def __post_init__(self) -> None:
        if self.draft_tokens != self.steps + self.topk:
            # chain drafting (topk 1): one draft token per step plus the verified one
            raise ConfigError(
                "draft_tokens",
                f"{self.draft_tokens} must be spec.steps + 1 ({self.steps + 1}) with topk 1",
            )
        if self.accept_mean > self.draft_tokens:
            raise ConfigError(
                "accept_mean", f"{self.accept_mean} exceeds draft_tokens ({self.draft_tokens})"
            )


@dataclass
class ServingConfig:
    """The serving world. Lists (batch_sizes, variants, mirror) are sweeps: cells are their
    product."""

    model: str = field(default="flash", metadata=rule("model shape", choices=MODELS))
    serving_mode: str = field(
        default="nonspec",
        metadata=rule("how the mirror is produced", choices_fn=mode_names),
    )
    batch_sizes: list[int] = field(
        default_factory=lambda: [8],
        metadata=rule("batch sizes (a sweep)", min=1, max=4096, nonempty=True),
    )
    context_len: int = field(
        default=4096, metadata=rule("tokens per request at most", min=256, max=1_048_576)
    )
    prefill_every: int = field(
        default=0, metadata=rule("a prefill step every N steps (0: never)", min=0, max=1_000_000)
    )
    variants: list[str] = field(
        default_factory=variant_names,
        metadata=rule("backend variants to run", choices_fn=variant_names, nonempty=True),
    )
    mirror: list[str] = field(
        default_factory=lambda: [MIRRORS[0]],
        metadata=rule(
            "host mirror: auto (what upstream serving does), or forced present/absent where "
            "the serving mode has that switch (specv2: the relay; direct)",
            choices=MIRRORS,
            nonempty=True,
        ),
    )
    cuda_graph: bool = field(default=True, metadata=rule("replay CUDA graphs when a bucket fits"))
    cuda_graph_max_bs: int | None = field(
        default=None,
        metadata=rule(
            "largest captured bucket (null: the bucket of each batch size)", min=1, max=4096
        ),
    )
    prep_in_graph: bool = field(default=True, metadata=rule("raw metadata on host, rest in graph"))
    forward_us: float = field(
        default=2000.0, metadata=rule("stand-in forward duration, µs (GPU only)", min=0, max=1e7)
    )
    kernels: str = field(default="torch", metadata=rule("metadata kernels", choices=KERNEL_IMPLS))
    spec: SpecConfig | None = field(
        default=None,
        metadata=rule("EAGLE settings (eagle and specv2; direct: drive EAGLE's passes)"),
    )

    def __post_init__(self) -> None:
        mode = traits_of(self.serving_mode)  # ValueError for an unknown one
        if mode.spec is False and self.spec is not None:
            takes = [name for name, m in MODES.items() if m.spec is not False]
            raise ConfigError(
                "spec", f"only for serving_mode {', '.join(takes[:-1])} or {takes[-1]}"
            )
        for m in self.mirror:
            if m not in mode.mirror_settings:
                raise ConfigError(
                    "mirror",
                    f"{m!r} is not a choice with serving_mode {self.serving_mode} "
                    f"(expected one of {', '.join(mode.mirror_settings)})",
                )
        if mode.spec and self.spec is None:
            self.spec = SpecConfig()


def serving_of(sc: Scenario) -> ServingConfig:
    """A scenario's `serving` section."""
    return sc.section(SECTION)
