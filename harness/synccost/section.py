"""The sync-cost experiment's scenario section, `sync_cost`: which syncs to inject, how many
per step, at which stand-in forward durations, in a step of how many requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.validate import rule
from harness.synccost.cases import INJECTIONS

SECTION = "sync_cost"


@dataclass
class SyncCostConfig:
    """The same step with k injected syncs of each kind, at each stand-in forward duration;
    cells are their product (k = 0 once per duration), for each batch size."""

    kinds: list[str] = field(
        default_factory=lambda: list(INJECTIONS),
        metadata=rule("sync kinds to inject", choices=tuple(INJECTIONS), nonempty=True),
    )
    k: list[int] = field(
        default_factory=lambda: [0, 1, 2, 4],
        metadata=rule("injected syncs per step (a sweep)", min=0, max=64, nonempty=True),
    )
    forward_us: list[float] = field(
        default_factory=lambda: [200.0, 1000.0, 4000.0],
        metadata=rule("stand-in forward durations, µs (a sweep)", min=0, max=1e6, nonempty=True),
    )
    batch_sizes: list[int] = field(
        default_factory=lambda: [8],
        metadata=rule(
            "requests in the metadata-like step (a sweep)", min=1, max=4096, nonempty=True
        ),
    )
