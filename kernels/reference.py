"""PyTorch reference composite of every metadata op ("torch" in the registry).

Written for clarity and for being sync-free: every size is a host int, there is no
.item()/.tolist()/nonzero/boolean-mask indexing/repeat_interleave without output_size, and
every new tensor is made on the inputs' device. These run unchanged on CUDA, CPU and the
harness's emulated device (tensors whose device type is "meta").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from kernels.api import (
    C4_RATIO,
    C128_RATIO,
    KV_PAGE_SIZE,
    NULL_SLOT,
    SWA_WINDOW,
    TOPK_CLUSTER_THRESHOLD,
    FullMetadataTensors,
    UpgradeInputs,
    c128_width,
    pad64,
)

_I32 = torch.int32
_I64 = torch.int64


def _pad_cols(x: Tensor, width: int) -> Tensor:
    if x.shape[-1] == width:
        return x
    return F.pad(x, (0, width - x.shape[-1]), value=-1)


def expand_lengths(
    base_lens: Tensor, extend_lens: Tensor | int, num_tokens: int
) -> tuple[Tensor, Tensor]:
    dev = base_lens.device
    bs = base_lens.shape[0]
    k = torch.arange(num_tokens, device=dev, dtype=_I64)
    base = base_lens.to(_I64)
    if isinstance(extend_lens, int):
        real = bs * extend_lens
        req = torch.div(k, extend_lens, rounding_mode="floor")
        offset = k - req * extend_lens
    else:
        ends = torch.cumsum(extend_lens.to(_I64), 0)
        req = torch.searchsorted(ends, k, right=True)
        real = None
        start = ends - extend_lens.to(_I64)
    is_pad = req >= bs if real is None else k >= real
    req = req.clamp(max=bs - 1)
    if real is None:
        offset = k - start[req]
    # masked_fill, not torch.where(mask, t, scalar): the latter fails on the emulated device
    lens = (base[req] + offset + 1).masked_fill(is_pad, 1)
    return req, lens.to(_I32)


def page_table(
    req_to_token: Tensor, token_pool_idx: Tensor, num_pages: int, page_size: int = KV_PAGE_SIZE
) -> Tensor:
    cols = torch.arange(num_pages, device=req_to_token.device, dtype=_I64) * page_size
    slots = req_to_token[token_pool_idx.to(_I64)[:, None], cols[None, :]]
    return torch.div(slots, page_size, rounding_mode="floor").to(_I32)


def swa_indices(
    req_to_token: Tensor,
    token_pool_idx: Tensor,
    seq_lens_casual: Tensor,
    full_to_swa: Tensor,
    window: int = SWA_WINDOW,
) -> tuple[Tensor, Tensor]:
    dev = req_to_token.device
    pos = seq_lens_casual.to(_I64) - 1
    offs = pos[:, None] - torch.arange(window, device=dev, dtype=_I64)[None, :]
    valid = offs >= 0
    full = req_to_token[token_pool_idx.to(_I64)[:, None], offs.clamp(min=0)]
    swa = full_to_swa[full.to(_I64)]
    # -1 explicitly below position 0 (upstream's torch path looked up full_to_swa[-1]).
    out = swa.masked_fill(~valid, -1).to(_I32)
    lengths = seq_lens_casual.clamp(max=window).to(_I32)
    return _pad_cols(out, pad64(window)), lengths


def compression(
    seq_lens_casual: Tensor, out_cache_loc: Tensor, ratio: int
) -> tuple[Tensor, Tensor, Tensor]:
    lens = seq_lens_casual.to(_I64)
    loc = out_cache_loc.to(_I64)
    completes = torch.remainder(lens, ratio) == 0
    out_loc = torch.div(loc, ratio, rounding_mode="floor").masked_fill(~completes, NULL_SLOT)
    raw = torch.div(lens, ratio, rounding_mode="floor").to(_I32)
    return out_loc, raw, raw.clamp(min=1)


def c128_page_indices(
    req_to_token: Tensor,
    token_pool_idx: Tensor,
    seq_lens_casual: Tensor,
    num_pages: int,
    page_size: int = KV_PAGE_SIZE,
) -> Tensor:
    dev = req_to_token.device
    per_page = page_size // C128_RATIO
    width = c128_width(num_pages, page_size)
    j = torch.arange(width, device=dev, dtype=_I64)
    page = torch.div(j, per_page, rounding_mode="floor").clamp(max=num_pages - 1)
    slots = req_to_token[token_pool_idx.to(_I64)[:, None], (page * page_size)[None, :]]
    vals = torch.div(slots.to(_I64), page_size, rounding_mode="floor") * per_page + (
        j - torch.div(j, per_page, rounding_mode="floor") * per_page
    )
    c128_len = torch.div(seq_lens_casual.to(_I64), C128_RATIO, rounding_mode="floor")
    valid = (j[None, :] < c128_len[:, None]) & (j[None, :] < num_pages * per_page)
    return vals.masked_fill(~valid, -1).to(_I32)


def sparse_buffers(c4_topk_lengths_clamp1: Tensor, index_topk: int) -> tuple[Tensor, Tensor]:
    n = c4_topk_lengths_clamp1.shape[0]
    lengths = c4_topk_lengths_clamp1.clamp(max=index_topk).to(_I32)
    pages = torch.full((n, pad64(index_topk)), -1, dtype=_I32, device=c4_topk_lengths_clamp1.device)
    return lengths, pages


def topk_schedule(c4_topk_lengths_raw: Tensor, threshold: int = TOPK_CLUSTER_THRESHOLD) -> Tensor:
    dev = c4_topk_lengths_raw.device
    n = c4_topk_lengths_raw.shape[0]
    lens = c4_topk_lengths_raw.to(_I64)
    flag = (lens > threshold).to(_I64)
    incl = torch.cumsum(flag, 0)
    # Flagged token -> row 1 + (flagged before it); the rest go to a scratch row n + 1.
    dest = incl.masked_fill(flag == 0, n + 1)
    rows = torch.stack([torch.arange(n, device=dev, dtype=_I64), lens], dim=1)
    # built by stack, not `sched[:, 1] = 0` (a scalar store the emulated device cannot take)
    sched = torch.stack(
        [
            torch.full((n + 2,), -1, dtype=_I64, device=dev),
            torch.zeros(n + 2, dtype=_I64, device=dev),
        ],
        dim=1,
    )
    sched.index_copy_(0, dest, rows)
    count = incl[-1:] if n > 0 else torch.zeros(1, dtype=_I64, device=dev)
    head = torch.cat([torch.full_like(count, threshold), count])
    sched[0] = head
    return sched[: n + 1].to(_I32)


def swa_out_cache_loc(out_cache_loc: Tensor, full_to_swa: Tensor) -> Tensor:
    return full_to_swa[out_cache_loc.to(_I64)].to(_I32)


def upgrade(inp: UpgradeInputs) -> FullMetadataTensors:
    """The reference composite: the individual ops in sequence (as upstream's PyTorch path)."""
    n = inp.n_tokens
    if inp.extend_lens is not None:
        token_req, lens = expand_lengths(inp.seq_lens, inp.extend_lens, n)
    else:
        base = inp.seq_lens + inp.base_lens_offset()
        token_req, lens = expand_lengths(base, inp.tokens_per_req, n)
    pool_idx = inp.req_pool_indices.to(_I64)[token_req]
    swa, swa_len = swa_indices(inp.req_to_token, pool_idx, lens, inp.full_to_swa, inp.swa_window)
    c4_loc, c4_raw, c4_c1 = compression(lens, inp.out_cache_loc, C4_RATIO)
    c128_loc, c128_raw, c128_c1 = compression(lens, inp.out_cache_loc, C128_RATIO)
    sparse_len, sparse_idx = sparse_buffers(c4_c1, inp.index_topk)
    return FullMetadataTensors(
        token_req=token_req,
        token_pool_idx=pool_idx,
        seq_lens_casual=lens,
        positions_casual=lens - 1,
        page_table=page_table(inp.req_to_token, pool_idx, inp.num_pages, inp.page_size),
        swa_page_indices=swa,
        swa_topk_lengths=swa_len,
        swa_out_cache_loc=swa_out_cache_loc(inp.out_cache_loc, inp.full_to_swa),
        c4_out_loc=c4_loc,
        c4_topk_lengths_raw=c4_raw,
        c4_topk_lengths_clamp1=c4_c1,
        c128_out_loc=c128_loc,
        c128_topk_lengths_raw=c128_raw,
        c128_topk_lengths_clamp1=c128_c1,
        c128_page_indices=c128_page_indices(
            inp.req_to_token, pool_idx, lens, inp.num_pages, inp.page_size
        ),
        c4_sparse_topk_lengths=sparse_len,
        c4_sparse_page_indices=sparse_idx,
        indexer_topk_schedule=topk_schedule(c4_raw, inp.topk_cluster_threshold),
    )


class TorchOps:
    """Registry entry "torch": the PyTorch reference composite."""

    name = "torch"
    expand_lengths = staticmethod(expand_lengths)
    page_table = staticmethod(page_table)
    swa_indices = staticmethod(swa_indices)
    compression = staticmethod(compression)
    c128_page_indices = staticmethod(c128_page_indices)
    sparse_buffers = staticmethod(sparse_buffers)
    topk_schedule = staticmethod(topk_schedule)
    swa_out_cache_loc = staticmethod(swa_out_cache_loc)
    upgrade = staticmethod(upgrade)
