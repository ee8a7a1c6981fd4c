"""Planted syncs: known-bad (and known-good) snippets, each with what the host does on a GPU.

Each case names the events the ledger must record (kind -> count, non-blocking hazards
included), hence the syncs the host makes. The ledger is trusted because it records exactly
these on the emulated device (in CI) and on CUDA, where the harness's `check sync` times every case
behind a sleeping GPU to count the real waits. Cases marked `measured` were counted that way on
an H200 (driver 580, torch 2.11); the others are hypotheses until that check confirms them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from syncledger.events import SyncKind

Inputs = dict[str, torch.Tensor]
Body = Callable[[Inputs, torch.device], object]
Setup = Callable[[Inputs, torch.device], None]


@dataclass(frozen=True)
class Case:
    name: str
    body: Body  # the one call under test; its events are what the ledger must record
    expected: Mapping[SyncKind, int] = field(default_factory=dict)  # empty: no event at all
    measured: bool = True  # False: the expectation is a hypothesis to confirm on a GPU
    setup: Setup | None = None  # runs after make_inputs, outside anything measured

    @property
    def syncs(self) -> int:
        """How many times the host waits (hazards are not waits)."""
        return sum(n for kind, n in self.expected.items() if kind.is_sync)


CASES: list[Case] = []


def case(
    name: str,
    body: Body,
    expected: Mapping[SyncKind, int] | None = None,
    *,
    measured: bool = True,
    setup: Setup | None = None,
) -> None:
    if any(c.name == name for c in CASES):
        raise ValueError(f"catalogue case {name!r} defined twice")
    CASES.append(Case(name, body, dict(expected or {}), measured, setup))


def make_inputs(dev: torch.device) -> Inputs:
    """Inputs built outside the measured block, so their own transfers don't count."""
    d = torch.arange(1, 9, dtype=torch.int64, device=dev)
    mask = d > 3
    idx = torch.tensor([0, 2], device=dev)
    return {
        "d": d,
        "f": d.float(),
        "y": torch.arange(8, device=dev),
        "repeats": torch.full((8,), 2, dtype=torch.int64, device=dev),
        "mask": mask,
        "idx": idx,
        "z": torch.tensor(7, device=dev),
        "v": d[1].float(),
        "eye": torch.eye(3, device=dev),
        "host_mask": torch.arange(1, 9) > 3,
        "host_idx": torch.tensor([0, 2]),
        "pageable": torch.arange(8, dtype=torch.int64),
        "pinned": torch.arange(8, dtype=torch.int64).pin_memory(),
        "pinned_strided": torch.arange(128, dtype=torch.int64).pin_memory().view(8, 16)[:, 0],
        "host_out_pinned": torch.empty(8, dtype=torch.int64).pin_memory(),
        "host_out_pageable": torch.empty(8, dtype=torch.int64),
    }


# the topic modules register their cases on import
from syncledger.catalogue import indexing, reads, transfers  # noqa: E402, F401
