"""Triton kernels, one per op (the fused upgrade lives in triton_fused.py).

Sizes that vary per step are `do_not_specialize`d so a new batch size reuses the compiled
kernel instead of compiling another specialization (value 1, multiple of 16).

Only imported through kernels.triton_launch (which imports triton). Every division here has
non-negative operands (slots, lengths >= 1, column indices), so Triton's truncating `//`
equals torch's floor division and results match the reference bit for bit.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n", "bs", "base_off"])
def expand_uniform_kernel(
    base_ptr, req_ptr, lens_ptr, n, bs, per_req, base_off, BLOCK: tl.constexpr
):
    # token k -> request k // per_req, length base + k % per_req + 1; k >= bs*per_req is padding
    k = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    m = k < n
    r = k // per_req
    pad = r >= bs
    r = tl.where(pad, bs - 1, r)
    base = tl.load(base_ptr + r, mask=m, other=0).to(tl.int64)
    lens = tl.where(pad, 1, base + base_off + (k - r * per_req) + 1)
    tl.store(req_ptr + k, r, mask=m)
    tl.store(lens_ptr + k, lens.to(tl.int32), mask=m)


@triton.jit(do_not_specialize=["n"])
def cumsum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # one program: inclusive prefix sum (int64) with a carry across blocks
    carry = tl.sum(tl.zeros((BLOCK,), tl.int64), axis=0)
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + i, mask=i < n, other=0).to(tl.int64)
        tl.store(out_ptr + i, tl.cumsum(x, axis=0) + carry, mask=i < n)
        carry += tl.sum(x, axis=0)


@triton.jit(do_not_specialize=["n", "bs"])
def expand_ragged_kernel(
    base_ptr, ext_ptr, ends_ptr, req_ptr, lens_ptr, n, bs, BLOCK: tl.constexpr, LOG: tl.constexpr
):
    # token k -> first request r with ends[r] > k (binary search, = searchsorted right)
    k = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    m = k < n
    lo = tl.zeros((BLOCK,), tl.int64)
    hi = tl.zeros((BLOCK,), tl.int64) + bs
    for _ in tl.static_range(LOG):
        active = (lo < hi) & m
        mid = (lo + hi) // 2
        v = tl.load(ends_ptr + mid, mask=active, other=0)
        lo = tl.where(active & (v <= k), mid + 1, lo)
        hi = tl.where(active & (v > k), mid, hi)
    pad = lo >= bs
    r = tl.where(pad, bs - 1, lo)
    end = tl.load(ends_ptr + r, mask=m, other=0)
    ext = tl.load(ext_ptr + r, mask=m, other=0).to(tl.int64)
    base = tl.load(base_ptr + r, mask=m, other=0).to(tl.int64)
    lens = tl.where(pad, 1, base + (k - (end - ext)) + 1)
    tl.store(req_ptr + k, r, mask=m)
    tl.store(lens_ptr + k, lens.to(tl.int32), mask=m)


@triton.jit(do_not_specialize=["r2t_stride", "num_pages"])
def page_table_kernel(
    r2t_ptr, pool_ptr, out_ptr, r2t_stride, num_pages, PAGE: tl.constexpr, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = p < num_pages
    rp = tl.load(pool_ptr + row).to(tl.int64)
    slot = tl.load(r2t_ptr + rp * r2t_stride + p.to(tl.int64) * PAGE, mask=m, other=0)
    tl.store(out_ptr + row * num_pages + p, (slot // PAGE).to(tl.int32), mask=m)


@triton.jit(do_not_specialize=["r2t_stride"])
def swa_kernel(
    r2t_ptr,
    pool_ptr,
    lens_ptr,
    f2s_ptr,
    out_ptr,
    len_out_ptr,
    r2t_stride,
    WINDOW: tl.constexpr,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    ln = tl.load(lens_ptr + row).to(tl.int64)
    rp = tl.load(pool_ptr + row).to(tl.int64)
    j = tl.arange(0, BLOCK)
    off = ln - 1 - j
    valid = (j < WINDOW) & (off >= 0)
    full = tl.load(r2t_ptr + rp * r2t_stride + tl.where(valid, off, 0), mask=valid, other=0)
    swa = tl.load(f2s_ptr + full.to(tl.int64), mask=valid, other=-1)
    tl.store(out_ptr + row * WIDTH + j, tl.where(valid, swa, -1).to(tl.int32), mask=j < WIDTH)
    tl.store(len_out_ptr + row, tl.minimum(ln, WINDOW).to(tl.int32))


@triton.jit(do_not_specialize=["n"])
def compression_kernel(
    lens_ptr, loc_ptr, out_loc_ptr, raw_ptr, clamp_ptr, n, RATIO: tl.constexpr, BLOCK: tl.constexpr
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    ln = tl.load(lens_ptr + i, mask=m, other=1).to(tl.int64)
    loc = tl.load(loc_ptr + i, mask=m, other=0).to(tl.int64)
    out_loc = tl.where(ln % RATIO == 0, loc // RATIO, 0)
    raw = (ln // RATIO).to(tl.int32)
    tl.store(out_loc_ptr + i, out_loc, mask=m)
    tl.store(raw_ptr + i, raw, mask=m)
    tl.store(clamp_ptr + i, tl.maximum(raw, 1), mask=m)


@triton.jit(do_not_specialize=["r2t_stride", "num_pages", "width"])
def c128_kernel(
    r2t_ptr,
    pool_ptr,
    lens_ptr,
    out_ptr,
    r2t_stride,
    num_pages,
    width,
    PAGE: tl.constexpr,
    PER_PAGE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ln = tl.load(lens_ptr + row).to(tl.int64)
    rp = tl.load(pool_ptr + row).to(tl.int64)
    valid = (j < ln // 128) & (j < num_pages * PER_PAGE)
    page = (j // PER_PAGE).to(tl.int64)
    slot = tl.load(r2t_ptr + rp * r2t_stride + page * PAGE, mask=valid, other=0)
    val = (slot // PAGE) * PER_PAGE + j % PER_PAGE
    tl.store(out_ptr + row * width + j, tl.where(valid, val, -1).to(tl.int32), mask=j < width)


@triton.jit(do_not_specialize=["width"])
def sparse_kernel(c1_ptr, len_out_ptr, idx_ptr, width, TOPK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1)
    j = col * BLOCK + tl.arange(0, BLOCK)
    tl.store(idx_ptr + row * width + j, tl.full((BLOCK,), -1, tl.int32), mask=j < width)
    if col == 0:
        c1 = tl.load(c1_ptr + row)
        tl.store(len_out_ptr + row, tl.minimum(c1, TOPK).to(tl.int32))


@triton.jit
def schedule_finish(out_ptr, count, n, threshold, BLOCK: tl.constexpr):
    """Top-k schedule tail: rows after the `count` flagged tokens are (-1, 0); row 0 is the
    header (threshold, count). Shared by the standalone and the fused kernel."""
    for start in range(0, n, BLOCK):
        r = (start + 1 + tl.arange(0, BLOCK)).to(tl.int64)
        rest = (r > count) & (r <= n)
        tl.store(out_ptr + r * 2, tl.full((BLOCK,), -1, tl.int32), mask=rest)
        tl.store(out_ptr + r * 2 + 1, tl.zeros((BLOCK,), tl.int32), mask=rest)
    tl.store(out_ptr, threshold)
    tl.store(out_ptr + 1, count)


@triton.jit(do_not_specialize=["n", "threshold"])
def schedule_kernel(raw_ptr, out_ptr, n, threshold, BLOCK: tl.constexpr):
    # one program: stable compaction of tokens with raw c4 length > threshold
    count = tl.sum(tl.zeros((BLOCK,), tl.int32), axis=0)
    for start in range(0, n, BLOCK):
        k = start + tl.arange(0, BLOCK)
        m = k < n
        ln = tl.load(raw_ptr + k, mask=m, other=0).to(tl.int32)
        flag = ((ln > threshold) & m).to(tl.int32)
        dest = (count + tl.cumsum(flag, axis=0)).to(tl.int64)  # row 1 + flagged-before
        tl.store(out_ptr + dest * 2, k.to(tl.int32), mask=flag == 1)
        tl.store(out_ptr + dest * 2 + 1, ln, mask=flag == 1)
        count += tl.sum(flag, axis=0)
    schedule_finish(out_ptr, count, n, threshold, BLOCK)


@triton.jit(do_not_specialize=["n"])
def gather_i32_kernel(idx_ptr, table_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    idx = tl.load(idx_ptr + i, mask=m, other=0).to(tl.int64)
    tl.store(out_ptr + i, tl.load(table_ptr + idx, mask=m, other=0).to(tl.int32), mask=m)


def next_pow2(x: int) -> int:
    return triton.next_power_of_2(max(int(x), 1))
