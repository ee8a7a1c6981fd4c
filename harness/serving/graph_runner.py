"""CUDA-graph runner for the metadata paths: buckets, padding, capture, replay, eager fallback.

The host-side sequence follows sglang's decode / verify / draft-decode runners:

capture (per bucket, largest first)
    static batch over the runner's buffers -> the runner's ``seq_lens.sum().item()`` (S05) ->
    ``init_forward_metadata_out_graph(in_capture=True)`` -> warm-up of the graph body (twice)
    -> capture of the body, where the body is ``init_forward_metadata_in_graph`` + the
    stand-in forward.
replay
    copy the batch into the static buffers (padded rows: seq_len 1, request row 0, KV slot 0)
    -> ``init_forward_metadata_out_graph`` on the static batch -> replay.

On CUDA the body is a real ``torch.cuda.CUDAGraph``. On the emulated device (graphs are not
emulated) the "graph" is the body itself, run at replay: the host sequence is the same and the
in-graph part is checked for syncs like any other code.

The decode / verify and draft-extend runners always hand the backend their own host length
buffer as ``seq_lens_cpu`` and refresh it only when the batch carries a mirror, so without a
mirror the backend sees stale lengths (as upstream). The draft-decode runner hands ``None``
instead.
Every pass reports the host lengths the backend was given so the world can flag stale ones.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.batch.info import ForwardBatch, ForwardMode, SpecInfo
from harness.serving.buckets import (
    PAD_OUT_CACHE_LOC,
    PAD_REQ_POOL_INDEX,
    PAD_SEQ_LEN,
    pad_rows,
    pick_bucket,
)
from syncledger import is_emulated, region, tags


@dataclass
class PassRecord:
    """One forward pass of a step."""

    forward_mode: str
    path: str  # "graph" | "eager"
    batch_size: int
    bucket: int | None  # padded size on the graph path
    host_lens_used: torch.Tensor | None = field(default=None, repr=False)  # [batch_size] host


class GraphRunner:
    """Runs one kind of forward pass (DECODE, TARGET_VERIFY or draft DECODE) from CUDA graphs
    when the batch fits a captured bucket, eagerly otherwise."""

    def __init__(
        self,
        name: str,
        backend: Any,
        forward_mode: ForwardMode,
        buckets: Sequence[int],
        tokens_per_req: int,
        device: torch.device,
        forward: Callable[[], None],
        spec: SpecInfo | None = None,
        mirror_when_absent: str = "stale_buffer",  # or "none" (draft-decode runner)
        use_graphs: bool = True,
    ):
        assert mirror_when_absent in ("stale_buffer", "none")
        self.name = name
        self.backend = backend
        self.forward_mode = forward_mode
        self.buckets = sorted(buckets) if use_graphs else []
        self.tokens_per_req = tokens_per_req
        self.device = device
        self.forward = forward
        self.spec = spec
        self.mirror_when_absent = mirror_when_absent
        self.real_graphs = device.type == "cuda"
        self._pool: Any = None
        self.graphs: dict[int, Any] = {}
        self._static: dict[int, ForwardBatch] = {}
        max_bs = max(self.buckets) if self.buckets else 0
        # Static inputs, as upstream: allocated once at the largest bucket.
        self.req_pool_indices = torch.full(
            (max_bs,), PAD_REQ_POOL_INDEX, dtype=torch.int64, device=device
        )
        self.seq_lens = torch.full((max_bs,), PAD_SEQ_LEN, dtype=torch.int64, device=device)
        self.out_cache_loc = torch.full(
            (max_bs * tokens_per_req,), PAD_OUT_CACHE_LOC, dtype=torch.int64, device=device
        )
        self.seq_lens_cpu = torch.full((max_bs,), PAD_SEQ_LEN, dtype=torch.int64)  # host

    @property
    def max_bs(self) -> int:
        return max(self.buckets) if self.buckets else 0

    def bucket_for(self, batch: ForwardBatch) -> int | None:
        """The captured size the batch replays, or None: it runs eagerly.

        Alone, the bucket of its own size. Under DP attention the ranks decide together
        (decode_cuda_graph_runner.py:409-431, 937-946): graphs only when every rank can run
        them (``can_run_dp_cuda_graph``), each rank padded to the bucket of the largest batch
        across ranks, and eager for every rank when that batch is above the largest bucket."""
        if not self.graphs:
            return None
        size = batch.batch_size
        if batch.dp is not None:
            if not batch.dp.can_run_dp_cuda_graph:
                return None
            size = max(batch.dp.global_num_tokens)
        return pick_bucket(self.buckets, size)

    # ---- capture --------------------------------------------------------------------------
    def _static_batch(self, bs: int) -> ForwardBatch:
        if bs not in self._static:
            self._static[bs] = ForwardBatch(
                forward_mode=self.forward_mode,
                batch_size=bs,
                seq_lens=self.seq_lens[:bs],
                req_pool_indices=self.req_pool_indices[:bs],
                out_cache_loc=self.out_cache_loc[: bs * self.tokens_per_req],
                seq_lens_cpu=self.seq_lens_cpu[:bs],
                seq_lens_sum=bs * PAD_SEQ_LEN,
                spec_info=self.spec,
            )
        return self._static[bs]

    def capture(self) -> None:
        """Capture every bucket, largest first (better memory sharing upstream)."""
        for bs in reversed(self.buckets):
            self._capture_one(bs)

    def _capture_one(self, bs: int) -> None:
        fb = self._static_batch(bs)
        backend = self.backend

        def body() -> None:
            backend.init_forward_metadata_in_graph(fb)
            self.forward()

        with tags(forward_mode=self.forward_mode.name, path="capture"), region("step"):
            with region("graph", "prepare"):
                _seq_lens_sum = int(fb.seq_lens.sum().item())  # fidelity: S05
            backend.init_forward_metadata_out_graph(fb, in_capture=True)
            with region("graph", "capture"):
                if self.real_graphs:
                    self.graphs[bs] = self._capture_cuda(body)
                else:
                    for _ in range(2):  # warm-up, as upstream
                        body()
                    self._after_warmup()
                    # entering torch.cuda.graph synchronizes and empties the allocator cache:
                    # make the same two calls so capture counts match a GPU's
                    if is_emulated(self.device):
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()
                    self.graphs[bs] = body

    def _after_warmup(self) -> None:
        hook = getattr(self.backend, "on_after_cuda_graph_warmup", None)
        if hook is not None:
            hook()

    def _capture_cuda(self, body: Callable[[], None]) -> Any:
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up on a side stream, as upstream
                body()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self._after_warmup()
        if self._pool is None:  # one pool for this runner's buckets, as upstream shares one
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        # Graphs of earlier worlds (a sweep builds many) must not be freed by the garbage
        # collector in the middle of a capture: that invalidates it, and a failed capture
        # leaves its memory pool recording, which breaks every later capture in the process.
        gc.collect()
        gc.disable()
        try:
            with torch.cuda.graph(graph, pool=self._pool):
                body()
        finally:
            gc.enable()
        return graph

    # ---- run ------------------------------------------------------------------------------
    def run(self, batch: ForwardBatch) -> PassRecord:
        """One forward pass: graph replay when the batch fits a bucket, else eager. The decode
        runner also runs DP attention's IDLE batches (no rows: the replay pads them all)."""
        idle = batch.forward_mode.is_idle() and self.forward_mode.is_decode()
        assert batch.forward_mode is self.forward_mode or idle, (
            batch.forward_mode,
            self.forward_mode,
        )
        bs = self.bucket_for(batch)
        if bs is not None:
            return self._replay(batch, bs)
        return run_eager(self.backend, batch, self.forward)

    def _replay(self, batch: ForwardBatch, bs: int) -> PassRecord:
        raw_bs = batch.batch_size
        ntok = self.tokens_per_req
        with tags(forward_mode=batch.forward_mode.name, path="graph"):
            with region("graph", "prepare"):
                pad_rows(batch.req_pool_indices, self.req_pool_indices[:bs], PAD_REQ_POOL_INDEX)
                pad_rows(batch.seq_lens, self.seq_lens[:bs], PAD_SEQ_LEN)
                pad_rows(batch.out_cache_loc, self.out_cache_loc[: bs * ntok], PAD_OUT_CACHE_LOC)
                fb = self._static_batch(bs)
                if batch.seq_lens_cpu is not None:
                    # host buffer refreshed only from a mirror (host-to-host, no sync)
                    if bs != raw_bs:
                        self.seq_lens_cpu[raw_bs:bs].fill_(PAD_SEQ_LEN)
                    self.seq_lens_cpu[:raw_bs].copy_(batch.seq_lens_cpu)
                    fb.seq_lens_cpu = self.seq_lens_cpu[:bs]
                    fb.seq_lens_sum = batch.seq_lens_sum + (bs - raw_bs) * PAD_SEQ_LEN
                elif self.mirror_when_absent == "stale_buffer":
                    fb.seq_lens_cpu = self.seq_lens_cpu[:bs]  # not refreshed: stale
                    fb.seq_lens_sum = None
                else:
                    fb.seq_lens_cpu = None
                    fb.seq_lens_sum = None
            used = None if fb.seq_lens_cpu is None else fb.seq_lens_cpu[:raw_bs].clone()
            self.backend.init_forward_metadata_out_graph(fb, in_capture=False)
            with region("graph", "replay"):
                if self.real_graphs:
                    self.graphs[bs].replay()
            if not self.real_graphs:
                self.graphs[bs]()  # the emulated "graph": the body runs now
        return PassRecord(batch.forward_mode.name, "graph", raw_bs, bs, used)


def run_eager(backend: Any, batch: ForwardBatch, forward: Callable[[], None]) -> PassRecord:
    """Eager pass: the whole metadata build out of graph, then the stand-in forward."""
    with tags(forward_mode=batch.forward_mode.name, path="eager"):
        backend.init_forward_metadata(batch)
        forward()
    used = None if batch.seq_lens_cpu is None else batch.seq_lens_cpu
    return PassRecord(batch.forward_mode.name, "eager", batch.batch_size, None, used)
