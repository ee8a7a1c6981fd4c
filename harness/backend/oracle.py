"""An independent, obviously-correct model of the full metadata: plain Python loops, one token
at a time, from host lists (the semantics of ``kernels.api.FullMetadataTensors``). Tests and GPU checks compare the backend
against it. Slow by design; use it on small batches only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.backend.metadata import COMPRESS_FIELDS, CORE_FIELDS
from harness.batch.info import ForwardMode

PAGE = 256
WINDOW = 128


def _pad64(x: int) -> int:
    return -(-x // 64) * 64


@dataclass(frozen=True)
class OracleCase:
    """Everything the metadata of one forward depends on, as host values.

    seq_lens follow the batch convention (decode/extend: including this step's tokens;
    verify: committed length). out_cache_loc has one slot per query token (padding included;
    draft decode: the whole request-major [bs * num_steps] buffer)."""

    mode: ForwardMode
    seq_lens: Sequence[int]
    req_pool_indices: Sequence[int]
    out_cache_loc: Sequence[int]
    req_to_token: Sequence[Sequence[int]]
    full_to_swa: Sequence[int]
    max_seq_len: int
    index_topk: int
    threshold: int
    extend_lens: Sequence[int] | None = None
    draft_tokens: int = 0
    draft_step: int = 0
    draft_steps: int = 0
    compress: bool = True


def _tokens(case: OracleCase) -> list[tuple[int, int]]:
    """(request, causal length) of every real query token, in order."""
    out = []
    for r, length in enumerate(case.seq_lens):
        if case.mode.is_target_verify():
            first, count = length + 1, case.draft_tokens
        elif case.mode.is_extend_like():
            ext = case.extend_lens[r]  # type: ignore[index]
            first, count = length - ext + 1, ext
        else:  # decode: the token decoded is the last one counted in seq_lens
            first, count = length, 1
        for k in range(count):
            out.append((r, first + k))
    return out


def full_metadata(case: OracleCase) -> dict[str, list]:
    """Field name -> nested lists, same names as `FullMetadata.tensors()`."""
    bs = len(case.seq_lens)
    out_loc = list(case.out_cache_loc)
    if case.draft_steps > 1:  # this step's slot of each request (topk 1)
        out_loc = [out_loc[r * case.draft_steps + case.draft_step] for r in range(bs)]
    toks = _tokens(case)
    n = len(out_loc)
    assert n >= len(toks), "fewer out-locations than tokens"
    toks += [(bs - 1, 1)] * (n - len(toks))  # padding tokens: last request, length 1
    pages = -(-case.max_seq_len // PAGE)
    c128_cols = _pad64(pages * (PAGE // 128))
    m: dict[str, list] = {k: [] for k in _FIELDS}
    for t, (r, length) in enumerate(toks):
        pool = case.req_pool_indices[r]
        row = case.req_to_token[pool]
        pos = length - 1
        m["token_req"].append(r)
        m["token_pool_idx"].append(pool)
        m["seq_lens_casual"].append(length)
        m["positions_casual"].append(pos)
        m["page_table"].append([row[i * PAGE] // PAGE for i in range(pages)])
        m["swa_page_indices"].append(
            [case.full_to_swa[row[pos - j]] if pos - j >= 0 else -1 for j in range(WINDOW)]
        )
        m["swa_topk_lengths"].append(min(length, WINDOW))
        m["swa_out_cache_loc"].append(case.full_to_swa[out_loc[t]])
        m["raw_out_loc"].append(out_loc[t])
        for ratio in (4, 128):
            m[f"c{ratio}_out_loc"].append(out_loc[t] // ratio if length % ratio == 0 else 0)
            m[f"c{ratio}_topk_lengths_raw"].append(length // ratio)
            m[f"c{ratio}_topk_lengths_clamp1"].append(max(length // ratio, 1))
        # Compressed group j starts at position 128 * j; its c128 slot is that token's slot
        # divided by 128 (pages are 256-slot aligned).
        m["c128_page_indices"].append(
            [row[128 * j] // 128 if j < length // 128 else -1 for j in range(c128_cols)]
        )
        m["c4_sparse_topk_lengths"].append(min(max(length // 4, 1), case.index_topk))
        m["c4_sparse_page_indices"].append([-1] * _pad64(case.index_topk))
    sched = [[case.threshold, 0]] + [[-1, 0] for _ in range(n)]
    for t in range(n):
        raw = m["c4_topk_lengths_raw"][t]
        if raw > case.threshold:
            sched[0][1] += 1
            sched[sched[0][1]] = [t, raw]
    m["indexer_topk_schedule"] = sched
    if not case.compress:
        for k in COMPRESS_FIELDS:
            del m[k]
    if case.mode.is_prefill():
        for ratio in (4, 128):
            plan, start = [], 0
            for length, ext in zip(case.seq_lens, case.extend_lens):  # type: ignore[arg-type]
                first = (length - ext) // ratio
                plan.append([first, length // ratio - first, start])
                start += ext
            m[f"c{ratio}_compress_plan"] = plan
    return m


# the names only are shared with the backend; every value here is computed independently
_FIELDS = CORE_FIELDS + COMPRESS_FIELDS
