"""The cells both sides run: an entry point per forward mode, mirror and path, on shared inputs.

A cell builds one pool and one batch (seeded, scrambled pages, as the model's backend tests)
and hands the same tensors to each side; its path (`harness.upstream.paths`) sets up what must
come first outside the ledger, then the measured call runs under it. An outcome is the syncs
made (kind and site), or the exception raised, and the values computed on the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from harness.batch.info import ForwardBatch, ForwardMode, SpecInfo, make_batch
from harness.batch.pool import ReqToTokenPool
from harness.checks.backend_cases import CaseSpec, build_pool, make_case_batch, reserve_for

SPEC = SpecInfo(draft_token_num=4, num_steps=3, topk=1)
LENS = (9, 300, 700)
CONTEXT_LEN = 1000
SEED = 5
BUCKET = 4  # the captured batch size the graph cells pad to
EXTEND_LENS = {ForwardMode.EXTEND: (3, 100, 50), ForwardMode.DRAFT_EXTEND: (4, 4, 4)}


@dataclass(frozen=True)
class Cell:
    path: str  # a key of harness.upstream.paths.PATHS
    mode: ForwardMode
    mirror: bool | None  # None: the path decides whether the batch gets one (the relay)
    prep: bool = True
    ratios: tuple[int, ...] = ()  # sparse prefill: the compress ratios of the forward's layers

    @property
    def name(self) -> str:
        prep = "" if self.prep else " prep-off"
        layers = " " + "+".join(f"c{r}" for r in self.ratios) if self.ratios else ""
        mirror = (
            "" if self.mirror is None else ", mirror " + ("present" if self.mirror else "absent")
        )
        return f"{self.path} {self.mode.name.lower()}{prep}{layers}{mirror}"


@dataclass
class Outcome:
    syncs: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, file:line, function)
    exception: str | None = None
    values: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted(k for k, _, _ in self.syncs))

    def summary(self) -> str:
        if self.exception:
            return self.exception
        return f"{len(self.syncs)} " + (",".join(self.kinds) if self.syncs else "")


@dataclass
class CellInputs:
    """One cell's pool and batches, shared by both sides."""

    cell: Cell
    device: torch.device
    pool: ReqToTokenPool
    rows: list[int]
    case: CaseSpec

    @property
    def mirror(self) -> bool:
        return bool(self.cell.mirror)

    def batch(self, mirror: bool) -> ForwardBatch:
        return make_case_batch(self.pool, self.rows, self.case, self.device, mirror)

    def graph_batch(self, mirror: bool) -> ForwardBatch:
        """The batch padded to the captured size as a CUDA-graph runner pads it."""
        case, pad = self.case, BUCKET - len(self.case.seq_lens)
        b = self.batch(mirror)
        return make_batch(
            case.mode,
            seq_lens=list(case.seq_lens) + [1] * pad,
            req_pool_indices=self.rows[: len(case.seq_lens)] + [0] * pad,
            out_cache_loc=b.out_cache_loc,
            device=self.device,
            extend_lens=[SPEC.draft_token_num] * BUCKET if case.mode.is_draft_extend() else None,
            spec=SPEC,
            mirror=mirror,
        )


def cell_inputs(cell: Cell, device: torch.device) -> CellInputs:
    steps = SPEC.num_steps if cell.path.startswith("draft") else 0
    case = CaseSpec(cell.mode, LENS, EXTEND_LENS.get(cell.mode), SPEC, draft_steps=steps)
    pool, rows = build_pool(device, len(LENS), CONTEXT_LEN, seed=SEED)
    reserve_for(pool, rows, case, SEED)
    return CellInputs(cell, device, pool, rows, case)


M = ForwardMode
_BOTH = (True, False)
FLASH_RATIOS = (0, 4, 128)  # V4 Flash's layers, in the order its forward first meets them
CELLS: tuple[Cell, ...] = (
    *(
        Cell("eager", mode, mirror, prep)
        for mode in (M.DECODE, M.TARGET_VERIFY)
        for prep in _BOTH
        for mirror in _BOTH
    ),
    *(Cell("eager-again", M.TARGET_VERIFY, mirror) for mirror in _BOTH),
    *(Cell("eager", mode, mirror) for mode in (M.DRAFT_EXTEND, M.EXTEND) for mirror in _BOTH),
    *(Cell("capture", mode, True, prep) for mode in (M.DECODE, M.TARGET_VERIFY) for prep in _BOTH),
    Cell("capture", M.DRAFT_EXTEND, True),
    *(
        Cell("replay", mode, mirror, prep)
        for mode in (M.DECODE, M.TARGET_VERIFY)
        for prep in _BOTH
        for mirror in _BOTH
    ),
    *(Cell("replay", M.DRAFT_EXTEND, mirror) for mirror in _BOTH),
    *(
        Cell(stage, M.DECODE, mirror)
        for stage in ("draft-eager", "draft-replay")
        for mirror in _BOTH
    ),
    Cell("draft-capture", M.DECODE, True),
    # _forward_prefill_sparse: a forward's first layer of each ratio alone, then a forward
    # meeting all three (the chunk cache is built once per forward)
    *(Cell("sparse-prefill", M.EXTEND, True, ratios=(r,)) for r in FLASH_RATIOS),
    *(Cell("sparse-prefill", M.EXTEND, mirror, ratios=FLASH_RATIOS) for mirror in _BOTH),
    # the spec-v2 relay: publish then resolve a decode batch's lengths, the mirror pulled when
    # the backends want it; before any publish it bootstraps with a plain copy
    Cell("relay", M.DECODE, None),
    Cell("relay-bootstrap", M.DECODE, None),
)
