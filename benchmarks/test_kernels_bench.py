"""pytest-benchmark of the metadata ops on CUDA (skipped without a GPU).

    python -m pytest benchmarks -q --benchmark-only        # = make kernels-bench

Each round starts with the GPU idle and the L2 flushed (setup, untimed); the timed call ends
with torch.cuda.synchronize(), so the host timer covers the GPU work, not only the launch.
The full sweep with CUDA events, graph replay and CSV output is benchmarks/kernels_gpu.py.
"""

from __future__ import annotations

import pytest
import torch

import kernels

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

bc = pytest.importorskip("bench_common")

CASES = [
    bc.Case(model, mode, bs, 32768)
    for model in ("flash", "pro")
    for mode in ("decode", "verify")
    for bs in (1, 256)
]


@pytest.fixture(scope="module")
def flusher():
    return bc.L2Flusher(torch.device("cuda"))


@pytest.fixture(
    scope="module", params=CASES, ids=lambda c: f"{c.model}-{c.forward_mode}-bs{c.batch_size}"
)
def prepared(request):
    return bc.prepare(request.param, torch.device("cuda"))


@pytest.mark.parametrize("impl", ["torch", "triton"])
@pytest.mark.parametrize("op", list(bc.OPS))
def test_bench_op(benchmark, prepared, flusher, op, impl):
    ops = kernels.get_ops(impl)
    fn = bc.OPS[op]
    fn(ops, prepared)  # compile / warm up

    def setup():
        flusher()
        torch.cuda.synchronize()

    def run():
        fn(ops, prepared)
        torch.cuda.synchronize()  # the timer must see the GPU finish

    benchmark.group = (
        f"{op}-{prepared.case.model}-{prepared.case.forward_mode}-bs{prepared.case.batch_size}"
    )
    benchmark.pedantic(run, setup=setup, rounds=30, iterations=1, warmup_rounds=2)
