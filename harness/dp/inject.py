"""A sync planted on one rank, to measure what it costs the other ranks.

The kinds are the sync-cost experiment's (harness.synccost.cases.INJECTIONS: the name and the
ledger kind it must be counted as), made here on the rank's own tensors: ``item`` reads a device
value back, ``stream_sync`` synchronizes the current stream, ``blocking_copy`` copies from
pageable host memory to the device. Each waits for all the work queued before it on the
stream, as any such call in the scheduler would.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.dp.section import INJECT_REGIONS
from harness.synccost.cases import INJECTIONS


class Injection:
    """``count`` syncs of ``kind``, made each step in ``region``."""

    def __init__(self, kind: str, region: str, count: int, device: torch.device) -> None:
        if region not in INJECT_REGIONS:
            raise ValueError(f"inject region {region!r}; known: {INJECT_REGIONS}")
        self.sync = _MAKE[kind]
        self.region = region
        self.count = count
        self.device = device
        self.value = torch.zeros(1, dtype=torch.int64, device=device)
        self.pageable = torch.zeros(1, dtype=torch.int64)  # host memory, not pinned

    def at(self, region: str) -> None:
        """Make the syncs when ``region`` is this injection's region."""
        if region == self.region:
            for _ in range(self.count):
                self.sync(self)


def _item(inj: Injection) -> None:
    inj.value.item()


def _stream_sync(inj: Injection) -> None:
    torch.cuda.current_stream(inj.device).synchronize()


def _blocking_copy(inj: Injection) -> None:
    inj.value.copy_(inj.pageable)


_MAKE: dict[str, Callable[[Injection], None]] = {
    "item": _item,
    "stream_sync": _stream_sync,
    "blocking_copy": _blocking_copy,
}
assert set(_MAKE) == set(INJECTIONS), "every injection the schema offers is made here"
