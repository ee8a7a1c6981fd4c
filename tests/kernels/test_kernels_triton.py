"""Each Triton kernel equals its PyTorch reference bit for bit (CPU, TRITON_INTERPRET=1).

The interpreter runs one Python step per program (about 10 ms per token row of the fused
upgrade), so Hypothesis draws small batches, and the boundaries that token counts cross (the
256-token blocks of the per-token kernels, the 1024-element chunks of the prefix sums and the
schedule) are pinned on the kernels whose launches do not grow with the token count. The large
batches (256 and 512, decode and verify, the fused upgrade included) are checked bit for bit on
a GPU by `make kernels-gpu`.
"""

from __future__ import annotations

import sys

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kernels
from kernels.testing import CaseSpec, assert_same, random_inputs
from kernels.triton_ops import triton_path_for

pytest.importorskip("triton")


@pytest.fixture(autouse=True, scope="module")
def _interpreter():
    """TRITON_INTERPRET=1 for this module only: kernels imports triton lazily, at the first
    Triton-path call (inside this scope), so the kernels are built for the interpreter; other
    test modules keep plain CPU behaviour (the reference path)."""
    launch = sys.modules.get("kernels.triton_launch")
    if launch is not None and not launch.INTERPRETED:
        pytest.skip("this process built the Triton kernels for the GPU already")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        yield


REF = kernels.get_ops("torch")
TRI = kernels.get_ops("triton")
FEW = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
EDGE_LENS = [1, 3, 4, 5, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1024, 1025]

# (batch, context): interpreter time grows with the token count, not with the context
SHAPE = st.tuples(st.integers(1, 17), st.integers(1, 4096))
# token counts at the block edges of the per-token kernels (256) and of the chunked scans (1024)
BLOCK_EDGES = [255, 256, 257, 1023, 1024, 1025, 2049]


def _same(a, b, name: str) -> None:
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x.dtype == y.dtype and x.shape == y.shape, f"{name}[{i}]"
        assert torch.equal(x, y), f"{name}[{i}] values differ"


def _spec(bs, ctx, d, ragged=False, paged=True, topk=512, seed=0, lens=None):
    return CaseSpec(bs, ctx, d, topk, ragged, paged, lens=lens, threshold=40, seed=seed)


def test_interpreter_path_is_taken():
    assert triton_path_for(torch.zeros(1))
    assert "triton" in kernels.available_ops()


@FEW
@given(
    shape=SHAPE,
    d=st.sampled_from([0, 4]),
    ragged=st.booleans(),
    paged=st.booleans(),
    topk=st.sampled_from([512, 1024]),
    seed=st.integers(0, 2**16),
)
@example(shape=(17, 300), d=0, ragged=False, paged=True, topk=512, seed=1)
@example(shape=(16, 130), d=4, ragged=False, paged=False, topk=1024, seed=2)
@example(shape=(1, 1), d=0, ragged=False, paged=True, topk=512, seed=3)
@example(shape=(3, 4096), d=4, ragged=True, paged=True, topk=1024, seed=4)
def test_fused_upgrade_equals_reference(shape, d, ragged, paged, topk, seed):
    bs, ctx = shape
    inp = random_inputs(_spec(bs, ctx, d, ragged, paged, topk, seed))
    assert_same(REF.upgrade(inp), TRI.upgrade(inp))


@pytest.mark.parametrize("d", [0, 4])
def test_fused_upgrade_edge_lengths(d):
    lens = [max(x - d, 1) if d else x for x in EDGE_LENS]
    inp = random_inputs(_spec(len(lens), 1100, d, lens=lens))
    assert_same(REF.upgrade(inp), TRI.upgrade(inp))


@FEW
@given(
    shape=SHAPE,
    d=st.sampled_from([0, 4]),
    ragged=st.booleans(),
    paged=st.booleans(),
    seed=st.integers(0, 2**16),
)
@example(shape=(17, 260), d=0, ragged=False, paged=True, seed=5)
@example(shape=(2, 4096), d=4, ragged=True, paged=False, seed=6)
def test_each_kernel_equals_reference(shape, d, ragged, paged, seed):
    bs, ctx = shape
    inp = random_inputs(_spec(bs, ctx, d, ragged, paged, 1024, seed))
    full = REF.upgrade(inp)
    lens, pool, loc = full.seq_lens_casual, full.token_pool_idx, inp.out_cache_loc
    r2t, f2s, pages = inp.req_to_token, inp.full_to_swa, inp.num_pages
    if ragged:
        expand = (inp.seq_lens, inp.extend_lens, inp.n_tokens)
    else:
        expand = (inp.seq_lens + inp.base_lens_offset(), inp.tokens_per_req, inp.n_tokens)
    cases = {
        "expand_lengths": expand,
        "page_table": (r2t, pool, pages),
        "swa_indices": (r2t, pool, lens, f2s),
        "compression": (lens, loc, 4),
        "c128_page_indices": (r2t, pool, lens, pages),
        "sparse_buffers": (full.c4_topk_lengths_clamp1, 1024),
        "topk_schedule": (full.c4_topk_lengths_raw, 40),
        "swa_out_cache_loc": (loc, f2s),
    }
    for name, args in cases.items():
        _same(getattr(REF, name)(*args), getattr(TRI, name)(*args), name)
    _same(REF.compression(lens, loc, 128), TRI.compression(lens, loc, 128), "compression128")
    _same(REF.page_table(r2t, pool, 1), TRI.page_table(r2t, pool, 1), "page_table narrow")
    _same(
        REF.c128_page_indices(r2t, pool, lens, 1),
        TRI.c128_page_indices(r2t, pool, lens, 1),
        "c128 narrow",
    )


@pytest.mark.parametrize("n", BLOCK_EDGES)
def test_token_kernels_at_block_edges(n):
    """The kernels launched per block of tokens, or as one scan over them, at n tokens."""
    inp = random_inputs(_spec(n, 300, 0, seed=n))
    full = REF.upgrade(inp)
    lens, loc, f2s = full.seq_lens_casual, inp.out_cache_loc, inp.full_to_swa
    cases = {
        "expand_lengths": (inp.seq_lens + inp.base_lens_offset(), 1, n),
        "compression": (lens, loc, 4),
        "topk_schedule": (full.c4_topk_lengths_raw, 40),
        "swa_out_cache_loc": (loc, f2s),
    }
    for name, args in cases.items():
        _same(getattr(REF, name)(*args), getattr(TRI, name)(*args), f"{name} at {n}")
    _same(REF.compression(lens, loc, 128), TRI.compression(lens, loc, 128), "compression128")


@pytest.mark.parametrize("bs", [1023, 1024, 1025])
def test_ragged_expand_at_scan_edges(bs):
    """Ragged expansion over bs requests: the prefix sum of their token counts runs in
    1024-request chunks and each token finds its request by binary search."""
    inp = random_inputs(_spec(bs, 300, 4, ragged=True, seed=bs))
    args = (inp.seq_lens, inp.extend_lens, inp.n_tokens)
    _same(REF.expand_lengths(*args), TRI.expand_lengths(*args), f"ragged expand at bs {bs}")


def test_kernels_with_int64_lengths_and_empty_batch():
    inp = random_inputs(_spec(5, 700, 4))
    inp.seq_lens = inp.seq_lens.to(torch.int64)
    assert_same(REF.upgrade(inp), TRI.upgrade(inp))
    empty = torch.zeros(0, dtype=torch.int32)
    _same(REF.topk_schedule(empty, 8), TRI.topk_schedule(empty, 8), "empty schedule")
    _same(REF.expand_lengths(empty, 4, 0), TRI.expand_lengths(empty, 4, 0), "empty expand")


def test_emulated_device_falls_back_to_reference():
    sync = pytest.importorskip("syncledger")
    spec = _spec(4, 600, 4)
    expect = REF.upgrade(random_inputs(spec))
    with sync.emulated_device() as dev:
        inp = random_inputs(spec, device=dev)
        assert not triton_path_for(inp.seq_lens)
        got = {k: v.cpu() for k, v in TRI.upgrade(inp).as_dict().items()}
    for k, v in expect.as_dict().items():
        assert torch.equal(got[k], v), k
