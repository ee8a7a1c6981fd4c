"""Launchers for the Triton kernels: allocate outputs, pick block sizes, launch.

Launchers only read host metadata (shapes, strides, host ints), never device values, so they
make no host-device sync and are capturable in a CUDA graph.
"""

from __future__ import annotations

import torch
from torch import Tensor

from kernels import triton_kernels as tk
from kernels.api import (
    C128_RATIO,
    KV_PAGE_SIZE,
    SWA_WINDOW,
    TOPK_CLUSTER_THRESHOLD,
    FullMetadataTensors,
    UpgradeInputs,
    c128_width,
    pad64,
)
from kernels.triton_fused import upgrade_kernel

# whether the kernels were built for the Triton interpreter (TRITON_INTERPRET=1 at import)
INTERPRETED = type(upgrade_kernel).__name__ == "InterpretedFunction"
_I32 = torch.int32
_I64 = torch.int64
_BLOCK_1D = 256


def _c(x: Tensor) -> Tensor:
    return x if x.is_contiguous() else x.contiguous()


def _r2t(req_to_token: Tensor) -> Tensor:
    if req_to_token.stride(1) != 1:
        req_to_token = req_to_token.contiguous()
    return req_to_token


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def expand_lengths(
    base_lens: Tensor, extend_lens: Tensor | int, num_tokens: int
) -> tuple[Tensor, Tensor]:
    dev = base_lens.device
    bs = base_lens.shape[0]
    req = torch.empty(num_tokens, dtype=_I64, device=dev)
    lens = torch.empty(num_tokens, dtype=_I32, device=dev)
    if num_tokens == 0:
        return req, lens
    grid = (_cdiv(num_tokens, _BLOCK_1D),)
    if isinstance(extend_lens, int):
        tk.expand_uniform_kernel[grid](
            _c(base_lens), req, lens, num_tokens, bs, extend_lens, 0, BLOCK=_BLOCK_1D
        )
        return req, lens
    _expand_ragged(_c(base_lens), _c(extend_lens), num_tokens, req, lens)
    return req, lens


def _expand_ragged(base: Tensor, ext: Tensor, n: int, req: Tensor, lens: Tensor) -> None:
    bs = base.shape[0]
    ends = torch.empty(bs, dtype=_I64, device=base.device)
    tk.cumsum_kernel[(1,)](ext, ends, bs, BLOCK=1024)
    tk.expand_ragged_kernel[(_cdiv(n, _BLOCK_1D),)](
        base, ext, ends, req, lens, n, bs, BLOCK=_BLOCK_1D, LOG=max(bs, 1).bit_length() + 1
    )


def page_table(
    req_to_token: Tensor, token_pool_idx: Tensor, num_pages: int, page_size: int = KV_PAGE_SIZE
) -> Tensor:
    n = token_pool_idx.shape[0]
    out = torch.empty((n, num_pages), dtype=_I32, device=req_to_token.device)
    if n == 0 or num_pages == 0:
        return out
    r2t = _r2t(req_to_token)
    block = min(256, tk.next_pow2(num_pages))
    tk.page_table_kernel[(n, _cdiv(num_pages, block))](
        r2t, _c(token_pool_idx), out, r2t.stride(0), num_pages, PAGE=page_size, BLOCK=block
    )
    return out


def swa_indices(
    req_to_token: Tensor,
    token_pool_idx: Tensor,
    seq_lens_casual: Tensor,
    full_to_swa: Tensor,
    window: int = SWA_WINDOW,
) -> tuple[Tensor, Tensor]:
    n = seq_lens_casual.shape[0]
    dev = req_to_token.device
    width = pad64(window)
    out = torch.empty((n, width), dtype=_I32, device=dev)
    lengths = torch.empty(n, dtype=_I32, device=dev)
    if n == 0:
        return out, lengths
    r2t = _r2t(req_to_token)
    tk.swa_kernel[(n,)](
        r2t,
        _c(token_pool_idx),
        _c(seq_lens_casual),
        _c(full_to_swa),
        out,
        lengths,
        r2t.stride(0),
        WINDOW=window,
        WIDTH=width,
        BLOCK=tk.next_pow2(width),
    )
    return out, lengths


def compression(
    seq_lens_casual: Tensor, out_cache_loc: Tensor, ratio: int
) -> tuple[Tensor, Tensor, Tensor]:
    n = seq_lens_casual.shape[0]
    dev = seq_lens_casual.device
    out_loc = torch.empty(n, dtype=_I64, device=dev)
    raw = torch.empty(n, dtype=_I32, device=dev)
    clamp1 = torch.empty(n, dtype=_I32, device=dev)
    if n == 0:
        return out_loc, raw, clamp1
    tk.compression_kernel[(_cdiv(n, _BLOCK_1D),)](
        _c(seq_lens_casual),
        _c(out_cache_loc),
        out_loc,
        raw,
        clamp1,
        n,
        RATIO=ratio,
        BLOCK=_BLOCK_1D,
    )
    return out_loc, raw, clamp1


def c128_page_indices(
    req_to_token: Tensor,
    token_pool_idx: Tensor,
    seq_lens_casual: Tensor,
    num_pages: int,
    page_size: int = KV_PAGE_SIZE,
) -> Tensor:
    n = seq_lens_casual.shape[0]
    width = c128_width(num_pages, page_size)
    out = torch.empty((n, width), dtype=_I32, device=req_to_token.device)
    if n == 0 or width == 0:
        return out
    r2t = _r2t(req_to_token)
    block = min(512, tk.next_pow2(width))
    tk.c128_kernel[(n, _cdiv(width, block))](
        r2t,
        _c(token_pool_idx),
        _c(seq_lens_casual),
        out,
        r2t.stride(0),
        num_pages,
        width,
        PAGE=page_size,
        PER_PAGE=page_size // C128_RATIO,
        BLOCK=block,
    )
    return out


def sparse_buffers(c4_topk_lengths_clamp1: Tensor, index_topk: int) -> tuple[Tensor, Tensor]:
    n = c4_topk_lengths_clamp1.shape[0]
    dev = c4_topk_lengths_clamp1.device
    width = pad64(index_topk)
    lengths = torch.empty(n, dtype=_I32, device=dev)
    idx = torch.empty((n, width), dtype=_I32, device=dev)
    if n == 0:
        return lengths, idx
    block = min(1024, tk.next_pow2(width))
    tk.sparse_kernel[(n, _cdiv(width, block))](
        _c(c4_topk_lengths_clamp1), lengths, idx, width, TOPK=index_topk, BLOCK=block
    )
    return lengths, idx


def topk_schedule(c4_topk_lengths_raw: Tensor, threshold: int = TOPK_CLUSTER_THRESHOLD) -> Tensor:
    n = c4_topk_lengths_raw.shape[0]
    out = torch.empty((n + 1, 2), dtype=_I32, device=c4_topk_lengths_raw.device)
    tk.schedule_kernel[(1,)](_c(c4_topk_lengths_raw), out, n, threshold, BLOCK=1024)
    return out


def swa_out_cache_loc(out_cache_loc: Tensor, full_to_swa: Tensor) -> Tensor:
    n = out_cache_loc.shape[0]
    out = torch.empty(n, dtype=_I32, device=out_cache_loc.device)
    if n == 0:
        return out
    tk.gather_i32_kernel[(_cdiv(n, _BLOCK_1D),)](
        _c(out_cache_loc), _c(full_to_swa), out, n, BLOCK=_BLOCK_1D
    )
    return out


def _empty_full(inp: UpgradeInputs, req: Tensor, lens: Tensor) -> FullMetadataTensors:
    """Every output of the fused upgrade, allocated (the kernel writes each element)."""
    n, dev = inp.n_tokens, inp.seq_lens.device

    def vec(dtype: torch.dtype) -> Tensor:
        return torch.empty(n, dtype=dtype, device=dev)

    def mat(width: int) -> Tensor:
        return torch.empty((n, width), dtype=_I32, device=dev)

    return FullMetadataTensors(
        token_req=req,
        token_pool_idx=vec(_I64),
        seq_lens_casual=lens,
        positions_casual=vec(_I32),
        page_table=mat(inp.num_pages),
        swa_page_indices=mat(pad64(inp.swa_window)),
        swa_topk_lengths=vec(_I32),
        swa_out_cache_loc=vec(_I32),
        c4_out_loc=vec(_I64),
        c4_topk_lengths_raw=vec(_I32),
        c4_topk_lengths_clamp1=vec(_I32),
        c128_out_loc=vec(_I64),
        c128_topk_lengths_raw=vec(_I32),
        c128_topk_lengths_clamp1=vec(_I32),
        c128_page_indices=mat(c128_width(inp.num_pages, inp.page_size)),
        c4_sparse_topk_lengths=vec(_I32),
        c4_sparse_page_indices=mat(pad64(inp.index_topk)),
        indexer_topk_schedule=torch.empty((n + 1, 2), dtype=_I32, device=dev),
    )


def upgrade(inp: UpgradeInputs) -> FullMetadataTensors:
    """Fused: one launch for decode / uniform verify; ragged adds the two expand launches."""
    n = inp.n_tokens
    num_pages = inp.num_pages
    c128_w = c128_width(num_pages, inp.page_size)
    swa_w = pad64(inp.swa_window)
    topk_w = pad64(inp.index_topk)
    seq = _c(inp.seq_lens)
    ragged = inp.extend_lens is not None
    req = torch.empty(n, dtype=_I64, device=seq.device)
    lens = torch.empty(n, dtype=_I32, device=seq.device)
    if ragged and n > 0:
        _expand_ragged(seq, _c(inp.extend_lens), n, req, lens)
    full = _empty_full(inp, req, lens)
    r2t = _r2t(inp.req_to_token)
    f = full
    upgrade_kernel[(n + 1,)](
        r2t,
        _c(inp.req_pool_indices),
        seq,
        _c(inp.out_cache_loc),
        _c(inp.full_to_swa),
        req,
        lens,
        f.token_pool_idx,
        f.positions_casual,
        f.page_table,
        f.swa_page_indices,
        f.swa_topk_lengths,
        f.swa_out_cache_loc,
        f.c4_out_loc,
        f.c4_topk_lengths_raw,
        f.c4_topk_lengths_clamp1,
        f.c128_out_loc,
        f.c128_topk_lengths_raw,
        f.c128_topk_lengths_clamp1,
        f.c128_page_indices,
        f.c4_sparse_topk_lengths,
        f.c4_sparse_page_indices,
        f.indexer_topk_schedule,
        n,
        inp.batch_size,
        inp.tokens_per_req,
        inp.base_lens_offset(),
        r2t.stride(0),
        num_pages,
        c128_w,
        inp.topk_cluster_threshold,
        PAGE=inp.page_size,
        PER_PAGE=inp.page_size // C128_RATIO,
        WINDOW=inp.swa_window,
        SWA_W=swa_w,
        TOPK=inp.index_topk,
        TOPK_W=topk_w,
        RAGGED=ragged,
        BLOCK_P=min(256, tk.next_pow2(num_pages)),
        BLOCK_C=min(512, tk.next_pow2(c128_w)),
        BLOCK_W=tk.next_pow2(swa_w),
        BLOCK_S=min(1024, tk.next_pow2(topk_w)),
        BLOCK_SCHED=1024,
        num_warps=4,
    )
    return full
