"""Seeded example batches for tests and GPU checks: a pool with a scrambled page layout, a
batch for any forward mode, and the matching oracle case."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from harness.backend.backend import DeepseekV4AttnBackend
from harness.backend.oracle import OracleCase
from harness.batch.info import ForwardBatch, ForwardMode, SpecInfo, make_batch
from harness.batch.pool import PoolConfig, ReqToTokenPool
from syncledger import host_values


@dataclass(frozen=True)
class CaseSpec:
    """One batch in host terms. seq_lens follow the batch convention (see batch.py);
    extend_lens for EXTEND / DRAFT_EXTEND; pad_tokens extra zero out-locations (padding)."""

    mode: ForwardMode
    seq_lens: tuple[int, ...]
    extend_lens: tuple[int, ...] | None = None
    spec: SpecInfo | None = None
    pad_tokens: int = 0
    draft_steps: int = 0  # >1: a multi-step draft-decode batch ([bs * steps] out-locations)


def build_pool(
    device: torch.device, num_reqs: int, context_len: int, seed: int, draft_slots: int = 8
) -> tuple[ReqToTokenPool, list[int]]:
    """A pool whose rows and pages are handed out in a scrambled order (row 0 stays the
    padding row, as in the serving world)."""
    rng = random.Random(seed)
    pool = ReqToTokenPool(
        PoolConfig(
            max_reqs=num_reqs + 3, context_len=context_len, draft_slots=draft_slots, seed=seed
        ),
        device,
    )
    pool.alloc_req()  # row 0: padding row
    spare = [pool.alloc_req() for _ in range(2)]
    rows = [pool.alloc_req() for _ in range(num_reqs)]
    for r in spare:
        pool.reserve(r, rng.randint(1, 600))
    pool.free_req(spare[0])
    rng.shuffle(rows)
    return pool, rows


def reserve_for(pool: ReqToTokenPool, rows: list[int], case: CaseSpec, seed: int) -> None:
    """Back every position the case touches, in interleaved random increments."""
    rng = random.Random(seed)
    extra = case.spec.draft_token_num if case.spec else 0
    rows = rows[: len(case.seq_lens)]
    need = {
        r: min(pool.width, length + max(extra, case.draft_steps))
        for r, length in zip(rows, case.seq_lens)
    }
    done = dict.fromkeys(rows, 0)
    while any(done[r] < need[r] for r in rows):
        r = rng.choice([r for r in rows if done[r] < need[r]])
        done[r] = min(need[r], done[r] + rng.randint(1, 300))
        pool.reserve(r, done[r])


def expected_span(
    backend: DeepseekV4AttnBackend, case: CaseSpec, *, mirror: bool, graph: bool
) -> int:
    """The page-table span (``max_seq_len``) the backend builds a case's metadata with."""
    if case.mode.is_draft_extend() and backend.policy.draft_extend_same_length:
        return backend.pool.page_size  # SWA only: a one-page placeholder (a9cf5e68)
    in_graph = backend.prep_in_graph and case.mode in (
        ForwardMode.DECODE,
        ForwardMode.TARGET_VERIFY,
    )
    if graph or in_graph or (not mirror and backend.variant == "dropped"):
        return backend.MAX_SEQ_LEN_FOR_CAPTURE
    return max(case.seq_lens)


def out_locations(pool: ReqToTokenPool, rows: list[int], case: CaseSpec) -> list[int]:
    out: list[int] = []
    for i, (r, length) in enumerate(zip(rows, case.seq_lens)):
        if case.mode.is_target_verify():
            out += pool.slots(r, length, length + case.spec.draft_token_num)  # type: ignore[union-attr]
        elif case.mode.is_extend_like():
            out += pool.slots(r, length - case.extend_lens[i], length)  # type: ignore[index]
        elif case.draft_steps > 1:
            out += pool.slots(r, length - 1, length - 1 + case.draft_steps)
        else:
            out += pool.slots(r, length - 1, length)
    return out + [0] * case.pad_tokens


def make_case_batch(
    pool: ReqToTokenPool, rows: list[int], case: CaseSpec, device: torch.device, mirror: bool
) -> ForwardBatch:
    return make_batch(
        case.mode,
        seq_lens=list(case.seq_lens),
        req_pool_indices=rows[: len(case.seq_lens)],
        out_cache_loc=out_locations(pool, rows, case),
        device=device,
        extend_lens=list(case.extend_lens) if case.extend_lens is not None else None,
        spec=case.spec,
        mirror=mirror,
    )


def oracle_case(
    pool: ReqToTokenPool,
    rows: list[int],
    case: CaseSpec,
    backend: DeepseekV4AttnBackend,
    *,
    max_seq_len: int,
    out_cache_loc: list[int] | None = None,
    seq_lens: list[int] | None = None,
    req_pool_indices: list[int] | None = None,
) -> OracleCase:
    """The oracle's view of the same batch (overrides describe a graph-padded batch)."""
    mode = case.mode
    lens = list(seq_lens if seq_lens is not None else case.seq_lens)
    ext = list(case.extend_lens) if case.extend_lens is not None else None
    if mode.is_draft_extend() and ext is None:
        ext = [backend.draft_extend_num_tokens_per_req] * len(lens)
    return OracleCase(
        mode=ForwardMode.DECODE if mode.is_idle() else mode,
        seq_lens=lens,
        req_pool_indices=req_pool_indices if req_pool_indices is not None else rows[: len(lens)],
        out_cache_loc=out_cache_loc
        if out_cache_loc is not None
        else out_locations(pool, rows, case),
        req_to_token=host_values(pool.req_to_token).cpu().tolist(),
        full_to_swa=host_values(pool.full_to_swa).cpu().tolist(),
        max_seq_len=max_seq_len,
        index_topk=backend.index_topk,
        threshold=backend.config.topk_cluster_threshold,
        extend_lens=ext,
        draft_tokens=case.spec.draft_token_num if case.spec else 0,
        draft_step=backend.step_id,
        draft_steps=backend.draft_steps,
        compress=not mode.is_draft_extend(),
    )


def metadata_lists(md) -> dict[str, list]:
    """Host lists of every tensor of a FullMetadata (no sync recorded on the emulated device)."""
    return {k: host_values(v).cpu().tolist() for k, v in md.tensors().items()}
