"""Helpers of the metadata paths: the per-request loop expansion (F09), the device-only
expansion, the compressor plans and the per-token core metadata built from an expansion."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

import kernels as kernel_lib
from harness.backend.metadata import FullMetadata
from harness.batch.info import host_to_device_async

# Token layout of an expansion: (token_req int64 [N], token_pool_idx int64 [N],
# seq_lens_casual int32 [N]).
Expansion = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def expand_loop_may_d2h(
    seq_lens: Sequence[int],
    extend_lens: Sequence[int],
    req_pool_indices: torch.Tensor,
    padded_num_tokens: int,
    device: torch.device,
) -> Expansion:
    """The per-request expansion of a36c8731 / 504570f4 (``expand_prefill_casually`` without
    ``extend_start_loc``: verify with prep off, the draft-extend graph bucket): two small
    kernels per request from host lists, then padding to the captured token count, whose pad
    value is read back from the device (``.item()``, F09)."""
    bs = len(seq_lens)
    num_tokens = int(sum(extend_lens))
    seq_parts: list[torch.Tensor] = []
    pool_parts: list[torch.Tensor] = []
    for r, (length, ext) in enumerate(zip(seq_lens, extend_lens)):
        start = int(length) - int(ext)
        seq_parts.append(torch.arange(start + 1, int(length) + 1, dtype=torch.int32, device=device))
        pool_parts.append(req_pool_indices[r : r + 1].to(torch.int64).repeat(int(ext)))
    if seq_parts:
        seq_lens_casual = torch.cat(seq_parts)
        pool_idx = torch.cat(pool_parts)
    else:
        seq_lens_casual = torch.zeros(0, dtype=torch.int32, device=device)
        pool_idx = torch.zeros(0, dtype=torch.int64, device=device)
    ext_dev = host_to_device_async(extend_lens, torch.int64, device)
    token_req = torch.repeat_interleave(  # output_size given: no sync
        torch.arange(bs, dtype=torch.int64, device=device), ext_dev, output_size=num_tokens
    )
    pad = padded_num_tokens - num_tokens
    if pad > 0:
        seq_lens_casual = F.pad(seq_lens_casual, (0, pad), value=1)
        pad_value = int(pool_idx[-1].item())  # fidelity: F09
        pool_idx = F.pad(pool_idx, (0, pad), value=pad_value)
        token_req = F.pad(token_req, (0, pad), value=bs - 1)
    return token_req, pool_idx, seq_lens_casual


def expand_device(
    ops: kernel_lib.MetadataOps,
    seq_lens: torch.Tensor,
    extend_lens: torch.Tensor | int,
    req_pool_indices: torch.Tensor,
    padded_num_tokens: int,
) -> Expansion:
    """Device-only expansion (the vectorized one): base = seq_lens - extend_lens; no host
    lists, no device read."""
    if isinstance(extend_lens, int):
        base = seq_lens.to(torch.int64) - extend_lens
    else:
        base = seq_lens.to(torch.int64) - extend_lens.to(torch.int64)
    token_req, lens = ops.expand_lengths(base, extend_lens, padded_num_tokens)
    return token_req, req_pool_indices.to(torch.int64)[token_req], lens


def compressor_plan_host(
    seq_lens: Sequence[int], extend_lens: Sequence[int], ratio: int, device: torch.device
) -> torch.Tensor:
    """Compressor plan of a prefill: planned on the host from lists into a new pinned buffer,
    then an async copy. Per request: (first compressed group written, groups completed, first
    token)."""
    rows, start = [], 0
    for length, ext in zip(seq_lens, extend_lens):
        first = (int(length) - int(ext)) // ratio
        rows.append((first, int(length) // ratio - first, start))
        start += int(ext)
    staged = torch.tensor(rows, dtype=torch.int32, pin_memory=device.type != "cpu")
    staged = staged.reshape(-1, 3)
    return staged.to(device, non_blocking=True)


def full_from_expansion(
    ops: kernel_lib.MetadataOps,
    exp: Expansion,
    *,
    req_to_token: torch.Tensor,
    full_to_swa: torch.Tensor,
    out_loc: torch.Tensor,
    max_seq_len: int,
    index_topk: int,
    compress: bool,
    topk_cluster_threshold: int,
) -> FullMetadata:
    """Core metadata from an expansion, plus compression metadata if asked."""
    token_req, pool_idx, lens = exp
    num_pages = kernel_lib.num_pages_for(max_seq_len)
    swa, swa_len = ops.swa_indices(req_to_token, pool_idx, lens, full_to_swa)
    fm = FullMetadata(
        token_req=token_req,
        token_pool_idx=pool_idx,
        seq_lens_casual=lens,
        positions_casual=lens - 1,
        page_table=ops.page_table(req_to_token, pool_idx, num_pages),
        swa_page_indices=swa,
        swa_topk_lengths=swa_len,
        swa_out_cache_loc=ops.swa_out_cache_loc(out_loc, full_to_swa),
        raw_out_loc=out_loc,
        index_topk=index_topk,
    )
    if compress:
        fm.c4_out_loc, fm.c4_topk_lengths_raw, fm.c4_topk_lengths_clamp1 = ops.compression(
            lens, out_loc, kernel_lib.C4_RATIO
        )
        fm.c128_out_loc, fm.c128_topk_lengths_raw, fm.c128_topk_lengths_clamp1 = ops.compression(
            lens, out_loc, kernel_lib.C128_RATIO
        )
        fm.c128_page_indices = ops.c128_page_indices(req_to_token, pool_idx, lens, num_pages)
        fm.c4_sparse_topk_lengths, fm.c4_sparse_page_indices = ops.sparse_buffers(
            fm.c4_topk_lengths_clamp1, index_topk
        )
        fm.indexer_topk_schedule = ops.topk_schedule(fm.c4_topk_lengths_raw, topk_cluster_threshold)
    return fm
