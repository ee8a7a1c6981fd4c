"""pytest-benchmark of the backend's metadata paths per variant, on a GPU.

Paths: the eager build (`init_forward_metadata`), the out-of-graph host work before a replay
(`init_forward_metadata_out_graph`), and the replay of a CUDA graph holding the in-graph
upgrade (`init_forward_metadata_in_graph`). Decode (no spec) and target verify (EAGLE, 4 draft
tokens), Flash shape, batch sizes 8 and 256, context 4096.

The timer synchronizes the GPU before reading the clock, so a round's time includes the
device work it launched (pytest-benchmark's default timer sees host time only).

    python -m pytest benchmarks/test_metadata_bench.py --benchmark-only \
        --benchmark-json=results/benchmarks/metadata.json

Skipped without CUDA.
"""

from __future__ import annotations

import time

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

VARIANTS = ("before", "after", "dropped")
BATCH_SIZES = (8, 256)
MODES = ("DECODE", "TARGET_VERIFY")
CONTEXT_LEN = 4096
SEQ_LEN = 3000


def cuda_timer() -> float:
    """Wait for the GPU, then read the host clock: rounds include their device work."""
    torch.cuda.synchronize()
    return time.perf_counter()


def _setup(variant: str, mode_name: str, bs: int, dev: torch.device | None = None):
    from harness.backend import BackendConfig, DeepseekV4AttnBackend
    from harness.batch.info import ForwardMode, SpecInfo, make_batch
    from harness.batch.pool import PoolConfig, ReqToTokenPool

    dev = dev or torch.device("cuda", torch.cuda.current_device())
    mode = ForwardMode[mode_name]
    spec = SpecInfo(draft_token_num=4, num_steps=3, topk=1) if mode_name != "DECODE" else None
    pool = ReqToTokenPool(PoolConfig(max_reqs=bs + 1, context_len=CONTEXT_LEN), dev)
    pool.alloc_req()  # row 0: the padding row
    rows = [pool.alloc_req() for _ in range(bs)]
    per_req = spec.draft_token_num if spec else 1
    for r in rows:
        pool.reserve(r, SEQ_LEN + per_req)
    out_loc = [s for r in rows for s in pool.slots(r, SEQ_LEN, SEQ_LEN + per_req)]
    backend = DeepseekV4AttnBackend(BackendConfig(model="flash", spec=spec), pool, dev, variant)
    # as served: non-speculative batches always carry the scheduler's lengths; a spec-v2 decode
    # batch carries them when the backend asks (the relay)
    mirror = spec is None or backend.needs_cpu_seq_lens
    batch = make_batch(
        mode,
        seq_lens=[SEQ_LEN] * bs,
        req_pool_indices=rows,
        out_cache_loc=out_loc,
        device=dev,
        spec=spec,
        mirror=mirror,
    )
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return backend, batch


@pytest.mark.parametrize("bs", BATCH_SIZES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.benchmark(group="metadata-eager", timer=cuda_timer, warmup=True)
def test_eager_build(benchmark, variant, mode, bs):
    backend, batch = _setup(variant, mode, bs)
    benchmark(backend.init_forward_metadata, batch)


@pytest.mark.parametrize("bs", BATCH_SIZES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.benchmark(group="metadata-out-graph", timer=cuda_timer, warmup=True)
def test_out_graph(benchmark, variant, mode, bs):
    backend, batch = _setup(variant, mode, bs)
    backend.init_forward_metadata_out_graph(batch, in_capture=True)  # creates the captured object
    benchmark(backend.init_forward_metadata_out_graph, batch, False)


@pytest.mark.parametrize("bs", BATCH_SIZES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.benchmark(group="metadata-graph-replay", timer=cuda_timer, warmup=True)
def test_graph_replay(benchmark, variant, mode, bs):
    backend, batch = _setup(variant, mode, bs)
    backend.init_forward_metadata_out_graph(batch, in_capture=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as capture requires
        backend.init_forward_metadata_in_graph(batch)
        backend.on_after_cuda_graph_warmup()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        backend.init_forward_metadata_in_graph(batch)
    backend.init_forward_metadata_out_graph(batch, False)  # fresh raw metadata, as per step
    benchmark(graph.replay)
