"""The cells both sides run: the backend's entry points per forward mode, mirror and path.

A cell builds one pool and one batch (seeded, scrambled pages, as the model's backend tests)
and hands the same tensors to each side. Its path sets up what must come first (a capture
before a replay, a first verify before a later one) outside the ledger, then the measured call
runs under it. An outcome is the syncs made (kind and site), or the exception raised, and the
torch-computed metadata's values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.batch.info import ForwardBatch, ForwardMode, SpecInfo, make_batch
from harness.batch.pool import ReqToTokenPool
from harness.checks.backend_cases import CaseSpec, build_pool, make_case_batch, reserve_for
from harness.upstream.sides import VALUE_FIELDS
from syncledger import SyncLedger, host_values

SPEC = SpecInfo(draft_token_num=4, num_steps=3, topk=1)
LENS = (9, 300, 700)
CONTEXT_LEN = 1000
SEED = 5
BUCKET = 4  # the captured batch size the graph cells pad to
EXTEND_LENS = {ForwardMode.EXTEND: (3, 100, 50), ForwardMode.DRAFT_EXTEND: (4, 4, 4)}


@dataclass(frozen=True)
class Cell:
    path: str  # a key of PATHS
    mode: ForwardMode
    mirror: bool
    prep: bool = True

    @property
    def name(self) -> str:
        prep = "" if self.prep else " prep-off"
        mirror = "present" if self.mirror else "absent"
        return f"{self.path} {self.mode.name.lower()}{prep}, mirror {mirror}"


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


# A path: (side, inputs) -> (the measured call, the backend whose metadata it leaves)
Path = Callable[[Any, CellInputs], tuple[Callable[[], Any], Any]]


def _eager(side: Any, x: CellInputs) -> tuple[Callable[[], Any], Any]:
    be = side.backend(x.pool, SPEC, x.cell.prep)
    b = side.batch(x.batch(x.cell.mirror))
    return lambda: be.init_forward_metadata(b), be


def _eager_again(side: Any, x: CellInputs) -> tuple[Callable[[], Any], Any]:
    call, be = _eager(side, x)
    call()  # the first call builds what later ones reuse (the verify lengths buffer)
    return call, be


def _capture(side: Any, be: Any, batch: Any) -> None:
    be.init_forward_metadata_out_graph(batch, in_capture=True)
    be.init_forward_metadata_in_graph(batch)


def _graph(side: Any, x: CellInputs, *, replay: bool) -> tuple[Callable[[], Any], Any]:
    be = side.backend(x.pool, SPEC, x.cell.prep)
    side.graph_state(be, BUCKET, SPEC.draft_token_num)
    cap = side.batch(x.graph_batch(True))  # a capture always has the host lengths
    if not replay:
        return lambda: _capture(side, be, cap), be
    _capture(side, be, cap)
    b = side.batch(x.graph_batch(x.cell.mirror))

    def replay_call() -> None:
        be.init_forward_metadata_out_graph(b)
        be.init_forward_metadata_in_graph(b)

    return replay_call, be


def _draft(side: Any, x: CellInputs, *, stage: str) -> tuple[Callable[[], Any], Any]:
    ms = side.multistep(x.pool, SPEC)
    b = side.batch(x.batch(x.cell.mirror))
    if stage == "eager":
        return lambda: ms.init_forward_metadata(b), None
    side.graph_state(ms, BUCKET, 1)
    cap = side.batch(x.batch(True))
    if stage == "capture":
        return lambda: _capture(side, ms, cap), None
    _capture(side, ms, cap)

    def replay_call() -> None:
        ms.init_forward_metadata_out_graph(b)
        ms.init_forward_metadata_in_graph(b)

    return replay_call, None


PATHS: dict[str, Path] = {
    "eager": _eager,
    "eager-again": _eager_again,
    "capture": lambda side, x: _graph(side, x, replay=False),
    "replay": lambda side, x: _graph(side, x, replay=True),
    "draft-eager": lambda side, x: _draft(side, x, stage="eager"),
    "draft-capture": lambda side, x: _draft(side, x, stage="capture"),
    "draft-replay": lambda side, x: _draft(side, x, stage="replay"),
}

M = ForwardMode
_BOTH = (True, False)
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
)


def run(side: Any, x: CellInputs) -> Outcome:
    """The cell on one side: set up, then the measured call under a ledger. An exception is the
    cell's outcome unless the side says it shows drift (then it propagates, one line)."""
    out = Outcome()
    with side.prep(x.cell.prep):
        try:
            call, backend = PATHS[x.cell.path](side, x)
        except Exception as exc:  # set-up raised: that is the cell's outcome
            side.check_drift(exc)
            out.exception = type(exc).__name__
            return out
        with SyncLedger() as ledger:
            try:
                call()
            except Exception as exc:
                side.check_drift(exc)
                out.exception = type(exc).__name__
    out.syncs = [(e.kind.value, e.location, e.function) for e in ledger.events if e.is_sync]
    if out.exception is None and backend is not None:
        md = side.full_metadata(backend)
        for name in VALUE_FIELDS:
            value = getattr(md, name, None)
            if isinstance(value, torch.Tensor):
                out.values[name] = host_values(value).clone()
    return out
