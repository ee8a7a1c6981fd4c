"""Torch bodies of the compiled-code stand-ins (harness.upstream.standins).

Each returns what upstream's Python around the compiled call expects (shapes, dtypes, the
plan classes), made on the inputs' device with no host wait, as the compiled code does. The
compression metadata is computed for real (its values feed the metadata compared with the
model's); plans and schedules are zero-filled buffers of the right shape: nothing on the
metadata paths reads them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

NUM_SMS = 132  # an H100's or H200's SM count; it only sizes the indexer schedule


def compression_metadata(
    seq_lens: torch.Tensor,
    positions: torch.Tensor,
    raw_out_loc: torch.Tensor,
    page_table: torch.Tensor | None = None,
    page_size: int = 0,
    compute_page_indices: bool = True,
) -> tuple[torch.Tensor | None, ...]:
    """Per token, for ratios 4 and 128: the compressed out-location (``raw // r`` where
    ``len % r == 0``, else 0), the position rounded down to a multiple of r, ``len // r`` and
    ``max(len // r, 1)``; for 128 also the compressed page indices (-1 beyond ``len // 128``)."""
    seq_lens = seq_lens.to(torch.int64)
    out: list[torch.Tensor | None] = []
    for r in (4, 128):
        raw = seq_lens // r
        loc = torch.where(seq_lens % r == 0, raw_out_loc.to(torch.int64) // r, 0)
        out += [loc, (positions & ~(r - 1)).to(torch.int32), raw.to(torch.int32)]
        out.append(torch.clamp(raw, min=1).to(torch.int32))
    pages = None
    if compute_page_indices:
        assert page_table is not None and page_size % 128 == 0
        per_page = page_size // 128
        width = per_page * page_table.shape[1]
        cols = torch.arange(width)
        vals = page_table.to(torch.int64)[:, cols // per_page] * per_page + cols % per_page
        valid = cols[None, :] < (seq_lens // 128)[:, None]
        pages = torch.where(valid, vals, -1).to(torch.int32)
    return (*out, pages)


def decode_plan(
    original: Any, compress_ratio: int, req_pool_indices: torch.Tensor, *a: Any, **k: Any
) -> Any:
    plan = original.__globals__["CompressorDecodePlan"]
    bs = int(req_pool_indices.shape[0])
    return plan(
        compress_ratio, torch.zeros(bs, 16, dtype=torch.uint8, device=req_pool_indices.device)
    )


def prefill_plan(
    original: Any,
    compress_ratio: int,
    req_pool_indices: torch.Tensor,
    *a: Any,
    num_q_tokens: int,
    **k: Any,
) -> Any:
    plan = original.__globals__["CompressorPrefillPlan"]
    dev = req_pool_indices.device
    n = int(num_q_tokens)
    zeros = lambda w: torch.zeros(n, w, dtype=torch.uint8, device=dev)  # noqa: E731
    return plan(compress_ratio, zeros(16), zeros(8))


def indexer_metadata(original: Any, seq_lens: torch.Tensor, page_size: int, num_sm: int) -> Any:
    """The indexer's schedule: [num_sm + 1, 2] int32."""
    return torch.zeros(num_sm + 1, 2, dtype=torch.int32, device=seq_lens.device)


def topk_plan(original: Any, seq_lens: torch.Tensor, static_threshold: int = 0) -> Any:
    """The top-k routing plan: [bs + 1, ints per batch] of the lengths' dtype."""
    ints = original.__globals__["_PLAN_METADATA_INTS_PER_BATCH"]
    return seq_lens.new_zeros(int(seq_lens.shape[0]) + 1, ints)


def flashmla(*args: Any, **kwargs: Any) -> tuple[Any, None]:
    """``get_mla_metadata()``: an opaque scheduler object (it is only assigned, never read)."""
    return SimpleNamespace(), None


def num_sms() -> int:
    return NUM_SMS


def indexer_metadata_dg(c4_seq_lens: torch.Tensor, page_size: int, num_sm: int) -> torch.Tensor:
    return torch.zeros(num_sm + 1, 2, dtype=torch.int32, device=c4_seq_lens.device)


def sparse_attention(q: torch.Tensor, kv: torch.Tensor, *args: Any, d_v: int, **kwargs: Any) -> Any:
    """``flash_mla_sparse_fwd``: the attention output ([tokens, heads, d_v] bf16) and its two
    per-row statistics, zero-filled (no metadata reads them)."""
    s_q, h_q = int(q.shape[0]), int(q.shape[1])
    stats = torch.zeros(s_q, h_q, dtype=torch.float32, device=q.device)
    return torch.zeros(s_q, h_q, d_v, dtype=torch.bfloat16, device=q.device), stats, stats


def launch_without_effect(original: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
    """A Triton launch of sparse prefill's: the gather lists (SWA token ids, combined indices)
    and the bf16 workspace the KV cache is dequantized into. Only the attention, stood in
    too, reads them."""
    return None
