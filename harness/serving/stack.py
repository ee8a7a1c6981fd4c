"""What a serving mode drives in a step: the serving stack below the scheduler.

The world (harness.serving.world) owns the scheduler, the step loop and the findings; it hands
a serving mode (harness.serving.modes) this stack and nothing else of itself: the device, the
request pool, the attention backends and their graph runners, the length relay and the lengths
the host knows, the stand-in forward, and the mirror setting the mode reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.batch.info import SpecInfo
from harness.batch.pool import ReqToTokenPool
from harness.serving.graph_runner import GraphRunner
from harness.serving.mirror import LengthRelay


@dataclass
class ServingStack:
    device: torch.device
    pool: ReqToTokenPool
    spec: SpecInfo | None
    target_backend: Any
    draft_extend_backend: Any | None  # EAGLE's draft model for extend batches
    relay: LengthRelay | None  # speculative decoding: the device's lengths, relay-published
    forward: Callable[..., None]  # the stand-in forward (at_forward: work at forward time)
    # the scenario's mirror setting ("auto", or a what-if: "present" / "absent")
    mirror: str
    # the spec-v2 relay's switch: the backends' needs_cpu_seq_lens unless a what-if forces it
    relay_wants_mirror: bool
    runners: dict[str, GraphRunner] = field(default_factory=dict)
    # overlap off: the lengths the last blocking copies brought to the host, by pool row
    host_lens: dict[int, int] = field(default_factory=dict)

    def prefill_backends(self) -> list[Any]:
        """Target prefill, then (EAGLE) the draft model's prefill."""
        if self.draft_extend_backend is None:
            return [self.target_backend]
        return [self.target_backend, self.draft_extend_backend]
