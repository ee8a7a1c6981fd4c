"""Random metadata inputs and an independent per-token plain-Python reference.

Used by the tests and the benchmark; the loop reference is written from the field
definitions of ``kernels.api.FullMetadataTensors`` directly (no tensor tricks), so it checks kernels.reference independently.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.api import (
    KV_PAGE_SIZE,
    NULL_SLOT,
    FullMetadataTensors,
    UpgradeInputs,
    c128_width,
    pad64,
)

DRAFT_SLOTS = 8  # req_to_token width = context + a few draft slots


@dataclass
class CaseSpec:
    """One random case: `lens` fixes per-request seq_lens (else random in 1..context - D)."""

    batch_size: int
    context_len: int
    num_draft_tokens: int = 0
    index_topk: int = 512
    ragged: bool = False
    paged: bool = True  # req_to_token built from whole 256-slot pages, as a paged allocator does
    lens: list[int] | None = None
    threshold: int = 64
    seed: int = 0
    edge_frac: float = 0.25  # share of random lengths snapped to k*{4,128,256} + {-1,0,1}


def random_inputs(spec: CaseSpec, device: torch.device | str = "cpu") -> UpgradeInputs:
    g = torch.Generator().manual_seed(spec.seed)
    bs, ctx, d = spec.batch_size, spec.context_len, spec.num_draft_tokens
    width = ctx + DRAFT_SLOTS
    pool_rows = bs + 3
    pages_per_row = (width + KV_PAGE_SIZE - 1) // KV_PAGE_SIZE
    total_pages = pool_rows * pages_per_row + 4
    total_slots = total_pages * KV_PAGE_SIZE
    if spec.paged:
        pages = torch.randint(1, total_pages, (pool_rows, pages_per_row), generator=g)
        cols = torch.arange(pages_per_row * KV_PAGE_SIZE)
        r2t = pages[:, cols // KV_PAGE_SIZE] * KV_PAGE_SIZE + cols % KV_PAGE_SIZE
        r2t = r2t[:, :width]
    else:
        r2t = torch.randint(0, total_slots, (pool_rows, width), generator=g)
    full_to_swa = torch.randint(0, total_slots // 2, (total_slots,), generator=g)
    req_pool = torch.randperm(pool_rows, generator=g)[:bs]
    if spec.ragged:
        ext = torch.randint(0, max(d, 1) + 1, (bs,), generator=g, dtype=torch.int32)
        per = ext
        max_new = max(d, 1)
    else:
        ext = None
        per = torch.full((bs,), max(d, 1), dtype=torch.int32)
        max_new = max(d, 1)
    if spec.lens is not None:
        seq = torch.tensor(spec.lens, dtype=torch.int64)
    else:
        hi = max(ctx - max_new, 1)
        seq = torch.randint(1, hi + 1, (bs,), generator=g)
        # edges: lengths at multiples of 4, 128 and 256 (compression groups, pages), +-1
        unit = torch.tensor([4, 128, 256])[torch.randint(0, 3, (bs,), generator=g)]
        snapped = (seq // unit) * unit + torch.randint(-1, 2, (bs,), generator=g)
        snap = torch.rand(bs, generator=g) < spec.edge_frac
        seq = torch.where(snap, snapped.clamp(1, hi), seq)
    if d > 0 or spec.ragged:
        seq = seq.clamp(max=width - max_new)  # token k gets seq + k + 1 <= width
    else:
        seq = seq.clamp(min=1, max=width)
    n = int(per.sum())
    pad = 3 if spec.ragged else 0  # ragged: a few padding tokens past the real total
    out_loc = torch.randint(0, total_slots, (n + pad,), generator=g)
    dev = torch.device(device)
    return UpgradeInputs(
        req_to_token=r2t.to(torch.int32).to(dev),
        req_pool_indices=req_pool.to(dev),
        seq_lens=seq.to(torch.int32).to(dev),
        out_cache_loc=out_loc.to(dev),
        full_to_swa=full_to_swa.to(dev),
        num_draft_tokens=d,
        extend_lens=None if ext is None else ext.to(dev),
        num_tokens=n + pad if spec.ragged else None,
        index_topk=spec.index_topk,
        topk_cluster_threshold=spec.threshold,
    )


def loop_reference(inp: UpgradeInputs) -> dict[str, list]:
    """Per-token plain-Python metadata (lists), straight from the field definitions."""
    r2t = inp.req_to_token.tolist()
    pool = inp.req_pool_indices.tolist()
    seq = inp.seq_lens.tolist()
    locs = inp.out_cache_loc.tolist()
    f2s = inp.full_to_swa.tolist()
    page, window, bs = inp.page_size, inp.swa_window, inp.batch_size
    tokens: list[tuple[int, int]] = []  # (request, causal length)
    if inp.extend_lens is not None:
        for r, e in enumerate(inp.extend_lens.tolist()):
            tokens += [(r, seq[r] + k + 1) for k in range(e)]
    else:
        for r in range(bs):
            if inp.num_draft_tokens == 0:
                tokens.append((r, seq[r]))
            else:
                tokens += [(r, seq[r] + k + 1) for k in range(inp.num_draft_tokens)]
    tokens += [(bs - 1, 1)] * (inp.n_tokens - len(tokens))
    num_pages = inp.num_pages
    q = page // 128
    out: dict[str, list] = {k: [] for k in FullMetadataTensors.__dataclass_fields__}
    for t, (r, ln) in enumerate(tokens):
        row = r2t[pool[r]]
        pos = ln - 1
        c4, c128 = ln // 4, ln // 128
        out["token_req"].append(r)
        out["token_pool_idx"].append(pool[r])
        out["seq_lens_casual"].append(ln)
        out["positions_casual"].append(pos)
        out["page_table"].append([row[i * page] // page for i in range(num_pages)])
        swa = [f2s[row[pos - j]] if pos - j >= 0 else -1 for j in range(window)]
        out["swa_page_indices"].append(swa + [-1] * (pad64(window) - window))
        out["swa_topk_lengths"].append(min(ln, window))
        out["swa_out_cache_loc"].append(f2s[locs[t]])
        out["c4_out_loc"].append(locs[t] // 4 if ln % 4 == 0 else NULL_SLOT)
        out["c4_topk_lengths_raw"].append(c4)
        out["c4_topk_lengths_clamp1"].append(max(c4, 1))
        out["c128_out_loc"].append(locs[t] // 128 if ln % 128 == 0 else NULL_SLOT)
        out["c128_topk_lengths_raw"].append(c128)
        out["c128_topk_lengths_clamp1"].append(max(c128, 1))
        out["c128_page_indices"].append(
            [
                row[(j // q) * page] // page * q + j % q if j < c128 and j < num_pages * q else -1
                for j in range(c128_width(num_pages, page))
            ]
        )
        out["c4_sparse_topk_lengths"].append(min(max(c4, 1), inp.index_topk))
        out["c4_sparse_page_indices"].append([-1] * pad64(inp.index_topk))
    thr = inp.topk_cluster_threshold
    picked = [[t, c] for t, c in enumerate(out["c4_topk_lengths_raw"]) if c > thr]
    rest = [[-1, 0]] * (len(tokens) - len(picked))
    out["indexer_topk_schedule"] = [[thr, len(picked)], *picked, *rest]
    return out


def assert_same(a: FullMetadataTensors, b: FullMetadataTensors) -> None:
    """Bit-for-bit: same dtype, shape and values for every field."""
    for name, x in a.as_dict().items():
        y = getattr(b, name)
        assert x.dtype == y.dtype, f"{name}: dtype {x.dtype} != {y.dtype}"
        assert x.shape == y.shape, f"{name}: shape {tuple(x.shape)} != {tuple(y.shape)}"
        assert torch.equal(x.cpu(), y.cpu()), f"{name}: values differ"


def as_lists(full: FullMetadataTensors) -> dict[str, list]:
    return {k: v.tolist() for k, v in full.as_dict().items()}
