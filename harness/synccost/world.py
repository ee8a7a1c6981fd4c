"""The step whose syncs are counted and timed: the sync-cost world's cells and their worlds.

One step, as an overlap scheduler runs it (the host prepares batch i+1 while the GPU runs
batch i):
1. `step/forward`: the stand-in forward is queued (it keeps the GPU busy for forward_us);
2. `step/metadata/inject`: k injected syncs of one kind, first thing of the next batch's
   metadata, so the first one waits for the queued forward;
3. `step/metadata`: the next batch's metadata, a small host and device step: lengths advance
   in a Python loop over the requests, go to the device through pinned memory without a
   sync, and a few device ops derive page counts, offsets and bounds from them.
Without injected syncs the metadata's host time overlaps the forward; a sync takes that
overlap away (the pipeline bubble). The count pass must see exactly k syncs per step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.runner.cells import Cell
from harness.scenario import Scenario
from harness.serving.standin import StandInForward
from harness.synccost.cases import INJECTIONS, SyncCostCase, parse_case
from syncledger import region, tags

PAGE = 64  # tokens per KV page of the metadata-like step


class SyncCostWorld:
    """A world for the runner (warmup_and_capture, step, findings) with k injected syncs."""

    def __init__(self, case: SyncCostCase, batch_size: int, seed: int, device: torch.device):
        self.case = case
        self.device = device
        self.findings: list = []
        self.forward = StandInForward(case.forward_us, device)
        gen = torch.Generator().manual_seed(seed)
        self.lens = [int(x) for x in torch.randint(PAGE, 64 * PAGE, (batch_size,), generator=gen)]
        pin = device.type != "cpu"  # CPU-only PyTorch builds cannot pin
        self.staged = torch.zeros(batch_size, dtype=torch.int64, pin_memory=pin)
        self.pageable = torch.zeros(batch_size, dtype=torch.int64)  # the blocking copy's source
        self.dev_lens = torch.zeros(batch_size, dtype=torch.int64, device=device)
        self.dev_copy = torch.zeros(batch_size, dtype=torch.int64, device=device)
        self.inject = _INJECT[case.kind] if case.k else None
        self.total_pages = 0  # the host's page budget of the next batch
        self.metadata: tuple[torch.Tensor, ...] = ()

    def warmup_and_capture(self) -> None:
        """Calibrate the stand-in forward (it syncs: set-up, never measured)."""
        with tags(path="warmup"):
            self.forward.prepare()

    def step(self) -> None:
        with tags(forward_mode="DECODE", path="eager"), region("step"):
            self.forward()
            with region("metadata"):
                with region("inject"):
                    for _ in range(self.case.k):
                        self.inject(self)
                self._next_batch_metadata()

    def _next_batch_metadata(self) -> None:
        self.lens = [n + 1 for n in self.lens]
        self.total_pages = sum(-(-n // PAGE) for n in self.lens)
        self.staged.copy_(torch.tensor(self.lens, dtype=torch.int64))
        self.dev_lens.copy_(self.staged, non_blocking=True)  # pinned source: no sync
        pages = (self.dev_lens + (PAGE - 1)) // PAGE
        self.metadata = (
            torch.cumsum(pages, 0),  # page offsets
            torch.clamp(self.dev_lens - 1, min=0),  # last position
            self.dev_lens.max(),  # bound for the kernels, kept on the device
        )


def _item(w: SyncCostWorld) -> None:
    w.dev_lens.sum().item()


def _stream_sync(w: SyncCostWorld) -> None:
    torch.cuda.current_stream(w.device).synchronize()


def _blocking_copy(w: SyncCostWorld) -> None:
    w.dev_copy.copy_(w.pageable)


_INJECT: dict[str, Callable[[SyncCostWorld], None]] = {
    "item": _item,
    "stream_sync": _stream_sync,
    "blocking_copy": _blocking_copy,
}
assert set(_INJECT) == set(INJECTIONS), "every injection the schema offers has a function"


def build_sync_cost_world(sc: Scenario, cell: Cell, device: torch.device) -> SyncCostWorld:
    case = parse_case(cell.case)
    if case is None:
        raise ValueError(f"not a sync-cost case: {cell.case!r}")
    return SyncCostWorld(case, cell.batch_size, sc.seed, device)
