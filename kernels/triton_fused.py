"""The fused whole-upgrade Triton kernel: one launch computes every tensor of
FullMetadataTensors (two more small launches first for ragged verify / draft-extend).

Grid (N + 1,): program k < N builds token k's row of every output; program N builds the
indexer top-k schedule (a stable compaction over all tokens, which needs a prefix sum), so
the serial scan runs beside the row programs rather than after them.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.triton_kernels import schedule_finish


@triton.jit
def _token_len(seq_ptr, k, bs, per_req, base_off):
    # uniform expansion (decode / verify): token k -> request k // per_req
    r = k // per_req
    pad = r >= bs
    r = tl.where(pad, bs - 1, r)
    base = tl.load(seq_ptr + r).to(tl.int64)
    ln = tl.where(pad, 1, base + base_off + (k - r * per_req) + 1)
    return r, ln


@triton.jit
def _schedule(
    seq_ptr,
    ext_lens_ptr,
    out_ptr,
    n,
    bs,
    per_req,
    base_off,
    threshold,
    RAGGED: tl.constexpr,
    BLOCK: tl.constexpr,
):
    count = tl.sum(tl.zeros((BLOCK,), tl.int32), axis=0)
    for start in range(0, n, BLOCK):
        k = (start + tl.arange(0, BLOCK)).to(tl.int64)
        m = k < n
        if RAGGED:
            ln = tl.load(ext_lens_ptr + k, mask=m, other=0).to(tl.int64)
        else:
            r = k // per_req
            pad = r >= bs
            r = tl.where(pad, bs - 1, r)
            base = tl.load(seq_ptr + r, mask=m, other=0).to(tl.int64)
            ln = tl.where(pad, 1, base + base_off + (k - r * per_req) + 1)
        raw = (ln // 4).to(tl.int32)
        flag = ((raw > threshold) & m).to(tl.int32)
        dest = (count + tl.cumsum(flag, axis=0)).to(tl.int64)
        tl.store(out_ptr + dest * 2, k.to(tl.int32), mask=flag == 1)
        tl.store(out_ptr + dest * 2 + 1, raw, mask=flag == 1)
        count += tl.sum(flag, axis=0)
    schedule_finish(out_ptr, count, n, threshold, BLOCK)


@triton.jit(
    do_not_specialize=["n", "bs", "base_off", "r2t_stride", "num_pages", "c128_w", "threshold"]
)
def upgrade_kernel(
    r2t_ptr,
    pool_ptr,
    seq_ptr,
    loc_ptr,
    f2s_ptr,
    req_ptr,  # int64 [N]: read when RAGGED (from the expand kernel), else written
    lens_ptr,  # int32 [N]: same
    pool_out,
    pos_out,
    pt_out,
    swa_out,
    swa_len_out,
    swa_loc_out,
    c4_loc_out,
    c4_raw_out,
    c4_c1_out,
    c128_loc_out,
    c128_raw_out,
    c128_c1_out,
    c128_idx_out,
    sp_len_out,
    sp_idx_out,
    sched_out,
    n,
    bs,
    per_req,
    base_off,
    r2t_stride,
    num_pages,
    c128_w,
    threshold,
    PAGE: tl.constexpr,
    PER_PAGE: tl.constexpr,
    WINDOW: tl.constexpr,
    SWA_W: tl.constexpr,
    TOPK: tl.constexpr,
    TOPK_W: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_SCHED: tl.constexpr,
):
    pid = tl.program_id(0)
    if pid == n:
        _schedule(
            seq_ptr, lens_ptr, sched_out, n, bs, per_req, base_off, threshold, RAGGED, BLOCK_SCHED
        )
    else:
        row = pid.to(tl.int64)
        r, ln = _row_request(seq_ptr, req_ptr, lens_ptr, row, bs, per_req, base_off, RAGGED)
        rp = tl.load(pool_ptr + r).to(tl.int64)
        tl.store(pool_out + row, rp)
        tl.store(pos_out + row, (ln - 1).to(tl.int32))
        _row_scalars(
            row, ln, loc_ptr, f2s_ptr, swa_loc_out, swa_len_out, c4_loc_out, c4_raw_out,
            c4_c1_out, c128_loc_out, c128_raw_out, c128_c1_out, sp_len_out, WINDOW, TOPK,
        )  # fmt: skip
        base = r2t_ptr + rp * r2t_stride  # the request's row of req_to_token
        _page_table(base, row, pt_out, num_pages, PAGE, BLOCK_P)
        _c128_indices(base, row, ln, c128_idx_out, c128_w, num_pages, PAGE, PER_PAGE, BLOCK_C)
        _swa_window(base, row, ln, f2s_ptr, swa_out, WINDOW, SWA_W, BLOCK_W)
        _sparse_unfilled(row, sp_idx_out, TOPK_W, BLOCK_S)


@triton.jit
def _row_request(seq_ptr, req_ptr, lens_ptr, row, bs, per_req, base_off, RAGGED: tl.constexpr):
    """Token row -> (request, length): from the expand kernel when RAGGED, else derived from
    the uniform expansion and written for the caller."""
    if RAGGED:
        r = tl.load(req_ptr + row)
        ln = tl.load(lens_ptr + row).to(tl.int64)
    else:
        r, ln = _token_len(seq_ptr, row, bs, per_req, base_off)
        tl.store(req_ptr + row, r)
        tl.store(lens_ptr + row, ln.to(tl.int32))
    return r, ln


@triton.jit
def _row_scalars(
    row, ln, loc_ptr, f2s_ptr, swa_loc_out, swa_len_out, c4_loc_out, c4_raw_out, c4_c1_out,
    c128_loc_out, c128_raw_out, c128_c1_out, sp_len_out,
    WINDOW: tl.constexpr, TOPK: tl.constexpr,
):  # fmt: skip
    """The row's scalars: SWA write slot and length, compression metadata, sparse length."""
    loc = tl.load(loc_ptr + row).to(tl.int64)
    tl.store(swa_loc_out + row, tl.load(f2s_ptr + loc).to(tl.int32))
    c4_raw = (ln // 4).to(tl.int32)
    c128_raw = (ln // 128).to(tl.int32)
    tl.store(c4_loc_out + row, tl.where(ln % 4 == 0, loc // 4, 0))
    tl.store(c4_raw_out + row, c4_raw)
    tl.store(c4_c1_out + row, tl.maximum(c4_raw, 1))
    tl.store(c128_loc_out + row, tl.where(ln % 128 == 0, loc // 128, 0))
    tl.store(c128_raw_out + row, c128_raw)
    tl.store(c128_c1_out + row, tl.maximum(c128_raw, 1))
    tl.store(sp_len_out + row, tl.minimum(tl.maximum(c4_raw, 1), TOPK))
    tl.store(swa_len_out + row, tl.minimum(ln, WINDOW).to(tl.int32))


@triton.jit
def _page_table(base, row, pt_out, num_pages, PAGE: tl.constexpr, BLOCK_P: tl.constexpr):
    """Every PAGE-th slot of the request's row, in pages."""
    for p0 in range(0, num_pages, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        m = p < num_pages
        slot = tl.load(base + p.to(tl.int64) * PAGE, mask=m, other=0)
        tl.store(pt_out + row * num_pages + p, (slot // PAGE).to(tl.int32), mask=m)


@triton.jit
def _c128_indices(
    base, row, ln, c128_idx_out, c128_w, num_pages,
    PAGE: tl.constexpr, PER_PAGE: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """c128 page indices (re-reads the page table's slots; L1/L2 hits, no cross-thread
    ordering); -1 past the row's compressed length."""
    c128_raw = (ln // 128).to(tl.int32)
    for j0 in range(0, c128_w, BLOCK_C):
        j = j0 + tl.arange(0, BLOCK_C)
        valid = (j < c128_raw) & (j < num_pages * PER_PAGE)
        slot = tl.load(base + (j // PER_PAGE).to(tl.int64) * PAGE, mask=valid, other=0)
        val = (slot // PAGE) * PER_PAGE + j % PER_PAGE
        tl.store(
            c128_idx_out + row * c128_w + j,
            tl.where(valid, val, -1).to(tl.int32),
            mask=j < c128_w,
        )


@triton.jit
def _swa_window(
    base, row, ln, f2s_ptr, swa_out,
    WINDOW: tl.constexpr, SWA_W: tl.constexpr, BLOCK_W: tl.constexpr,
):  # fmt: skip
    """The SWA window: the last WINDOW tokens' SWA slots, newest first; -1 before the start."""
    w = tl.arange(0, BLOCK_W)
    off = ln - 1 - w
    ok = (w < WINDOW) & (off >= 0)
    full = tl.load(base + tl.where(ok, off, 0), mask=ok, other=0)
    swa = tl.load(f2s_ptr + full.to(tl.int64), mask=ok, other=-1)
    tl.store(swa_out + row * SWA_W + w, tl.where(ok, swa, -1).to(tl.int32), mask=w < SWA_W)


@triton.jit
def _sparse_unfilled(row, sp_idx_out, TOPK_W: tl.constexpr, BLOCK_S: tl.constexpr):
    """Sparse page indices: all -1, filled later by the indexer."""
    for s0 in tl.static_range(0, TOPK_W, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        tl.store(sp_idx_out + row * TOPK_W + s, tl.full((BLOCK_S,), -1, tl.int32), mask=s < TOPK_W)
