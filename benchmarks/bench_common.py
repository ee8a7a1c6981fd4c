"""Shared pieces of the kernel benchmarks: cases, op calls, bytes formulas, timing.

Bytes formula (stated here, used for achieved bandwidth): the minimum bytes an op must move,
each distinct element counted once at its dtype size:
    bytes = bytes written (every output tensor, numel * itemsize)
          + bytes read    (per-request inputs bs * (4 + 8), per-token inputs N * itemsize,
                           gathered req_to_token entries: page table N * pages * 4,
                           c128 sum_t ceil(min(len_t // 128, 2 * pages) / 2) * 4,
                           SWA N * 128 * 4 plus full_to_swa gathers N * 128 * 8,
                           swa_out_cache_loc N * 8)
Strided gathers really move a 32-byte sector per 4-byte entry, so gather-heavy ops cannot
reach this bound; the summary also reports the time against max(bytes / bandwidth, the time
of an empty launch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

import kernels
from kernels.testing import CaseSpec, random_inputs

H200_NOMINAL_BW = 4.8e12  # B/s
H200_COPY_BW = 4.3e12  # B/s, measured device-to-device copy

BATCH_SIZES = (1, 8, 64, 256, 512)
FORWARD_MODES = {"decode": 0, "verify": 4}  # draft tokens D
MODELS = {"flash": kernels.INDEX_TOPK_FLASH, "pro": kernels.INDEX_TOPK_PRO}


@dataclass(frozen=True)
class Case:
    model: str
    forward_mode: str
    batch_size: int
    context_len: int
    seed: int = 0

    @property
    def spec(self) -> CaseSpec:
        return CaseSpec(
            self.batch_size,
            self.context_len,
            FORWARD_MODES[self.forward_mode],
            MODELS[self.model],
            threshold=kernels.TOPK_CLUSTER_THRESHOLD,
            seed=self.seed + self.batch_size,
        )


@dataclass
class Prepared:
    case: Case
    inp: kernels.UpgradeInputs
    full: kernels.FullMetadataTensors  # reference result, inputs for the single ops
    base_lens: Tensor  # expansion base (decode: seq_lens - 1; verify: seq_lens)

    @property
    def n(self) -> int:
        return self.inp.n_tokens


def prepare(case: Case, device: torch.device) -> Prepared:
    inp = random_inputs(case.spec, device=device)
    base = inp.seq_lens + inp.base_lens_offset()
    return Prepared(case, inp, kernels.get_ops("torch").upgrade(inp), base)


# op name -> call on (ops, prepared); every op of the interface plus the whole upgrade
OpFn = Callable[[kernels.MetadataOps, Prepared], object]


def _expand(o: kernels.MetadataOps, p: Prepared) -> object:
    return o.expand_lengths(p.base_lens, p.inp.tokens_per_req, p.n)


OPS: dict[str, OpFn] = {
    "expand_lengths": _expand,
    "page_table": lambda o, p: o.page_table(
        p.inp.req_to_token, p.full.token_pool_idx, p.inp.num_pages
    ),
    "swa_indices": lambda o, p: o.swa_indices(
        p.inp.req_to_token, p.full.token_pool_idx, p.full.seq_lens_casual, p.inp.full_to_swa
    ),
    "compression_c4": lambda o, p: o.compression(p.full.seq_lens_casual, p.inp.out_cache_loc, 4),
    "compression_c128": lambda o, p: o.compression(
        p.full.seq_lens_casual, p.inp.out_cache_loc, 128
    ),
    "c128_page_indices": lambda o, p: o.c128_page_indices(
        p.inp.req_to_token, p.full.token_pool_idx, p.full.seq_lens_casual, p.inp.num_pages
    ),
    "sparse_buffers": lambda o, p: o.sparse_buffers(
        p.full.c4_topk_lengths_clamp1, p.inp.index_topk
    ),
    "topk_schedule": lambda o, p: o.topk_schedule(
        p.full.c4_topk_lengths_raw, p.inp.topk_cluster_threshold
    ),
    "swa_out_cache_loc": lambda o, p: o.swa_out_cache_loc(p.inp.out_cache_loc, p.inp.full_to_swa),
    "upgrade": lambda o, p: o.upgrade(p.inp),
}


def outputs(result: object) -> tuple[Tensor, ...]:
    if isinstance(result, kernels.FullMetadataTensors):
        return tuple(result.as_dict().values())
    if isinstance(result, Tensor):
        return (result,)
    return tuple(result)  # type: ignore[arg-type]


def same(a: object, b: object) -> bool:
    xs, ys = outputs(a), outputs(b)
    return len(xs) == len(ys) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y) for x, y in zip(xs, ys)
    )


def bytes_moved(op: str, p: Prepared, result: object) -> int:
    """The formula of the module doc: bytes written + minimum bytes read."""
    n, pages, bs = p.n, p.inp.num_pages, p.inp.batch_size
    written = sum(t.numel() * t.element_size() for t in outputs(result))
    lens = p.full.seq_lens_casual.to(torch.int64)
    c128_cols = torch.clamp(lens // 128, max=2 * pages)
    c128_reads = int(((c128_cols + 1) // 2).sum()) * 4
    pt_reads = n * 8 + n * pages * 4
    swa_reads = n * (8 + 4) + n * 128 * (4 + 8)
    read = {
        "expand_lengths": bs * 4,
        "page_table": pt_reads,
        "swa_indices": swa_reads,
        "compression_c4": n * (4 + 8),
        "compression_c128": n * (4 + 8),
        "c128_page_indices": n * (8 + 4) + c128_reads,
        "sparse_buffers": n * 4,
        "topk_schedule": n * 4,
        "swa_out_cache_loc": n * 16,
        "upgrade": bs * 12 + n * pages * 4 + n * 128 * 12 + n * 16 + c128_reads,
    }[op]
    return written + read


class L2Flusher:
    """Writes a buffer larger than the L2 cache between samples (H200 L2: 60 MiB)."""

    def __init__(self, device: torch.device, nbytes: int = 256 << 20) -> None:
        self.buf = torch.empty(nbytes, dtype=torch.int8, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def time_eager_cuda(fn: Callable[[], object], flush: L2Flusher, samples: int) -> list[tuple]:
    """Per sample: (device_us from CUDA events, host_us of the call). GPU idle at start."""
    out = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(samples):
        flush()
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        start.record()
        fn()
        end.record()
        t1 = time.perf_counter_ns()
        end.synchronize()
        out.append((start.elapsed_time(end) * 1e3, (t1 - t0) / 1e3))
    return out


def time_graph_cuda(graph: torch.cuda.CUDAGraph, flush: L2Flusher, samples: int) -> list[float]:
    out = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(samples):
        flush()
        torch.cuda.synchronize()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return out


def capture(fn: Callable[[], object]) -> tuple[torch.cuda.CUDAGraph, object]:
    """Warm up on a side stream, then capture one call; returns (graph, its outputs)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = fn()
    return graph, result


def time_host(fn: Callable[[], object], samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30) -> float:
    """Measured device-to-device copy bandwidth in B/s (read + write counted)."""
    a = torch.empty(nbytes, dtype=torch.int8, device=device)
    b = torch.empty_like(a)
    for _ in range(2):
        b.copy_(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        b.copy_(a)
    end.record()
    end.synchronize()
    return 2 * nbytes * 5 / (start.elapsed_time(end) / 1e3)
