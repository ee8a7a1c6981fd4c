"""Upstream's own backend objects, built around the model's pool and batches.

`UpstreamWorld` holds a loaded tree's modules and makes what upstream's backend is handed in
serving: a model runner (the attributes the backend's constructor reads), upstream's
``DeepSeekV4TokenToKVPool`` holding the model pool's full-to-SWA mapping, and upstream's
``ForwardBatch`` carrying the model batch's own tensors.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from harness.batch.info import ForwardBatch, ForwardMode, SpecInfo
from harness.batch.pool import ReqToTokenPool

BACKEND = "sglang.srt.layers.attention.deepseek_v4_backend"
BATCH_INFO = "sglang.srt.model_executor.forward_batch_info"
POOL = "sglang.srt.mem_cache.deepseek_v4_memory_pool"
CONTEXT = "sglang.srt.runtime_context"
SPEC = "sglang.srt.speculative.spec_info"
# upstream decides with `_is_cuda` at import (torch.version.cuda); the emulated device is CUDA
CUDA_GATED = (BACKEND,)
PREP_FLAG = "SGLANG_PREP_IN_CUDA_GRAPH"
HEAD_DIM = 512
INDEX_TOPK = 512  # Flash


@contextmanager
def prep_in_graph(on: bool) -> Iterator[None]:
    """Upstream reads the prep-in-graph switch from the environment at every call."""
    before = os.environ.get(PREP_FLAG)
    os.environ[PREP_FLAG] = "1" if on else "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PREP_FLAG, None)
        else:
            os.environ[PREP_FLAG] = before


@dataclass
class UpstreamWorld:
    modules: dict[str, ModuleType]
    device: torch.device

    @property
    def backend_module(self) -> ModuleType:
        return self.modules[BACKEND]

    def server_args(self, spec: SpecInfo | None) -> SimpleNamespace:
        return SimpleNamespace(
            enable_deepseek_v4_fp4_indexer=False,
            speculative_algorithm="EAGLE" if spec else None,
            speculative_eagle_topk=spec.topk if spec else None,
            speculative_num_draft_tokens=spec.draft_token_num if spec else None,
            speculative_num_steps=spec.num_steps if spec else None,
            enable_torch_compile=False,
        )

    def kv_pool(self, pool: ReqToTokenPool) -> Any:
        """Upstream's pool class around the model's mapping. Upstream's mapping has one slot
        more than the pool, holding -1: a masked slot index of -1 maps to it."""
        cls = self.modules[POOL].DeepSeekV4TokenToKVPool
        kv = cls.__new__(cls)
        sentinel = torch.full((1,), -1, dtype=pool.full_to_swa.dtype, device=self.device)
        kv.full_to_swa_index_mapping = torch.cat([pool.full_to_swa, sentinel])
        kv.swa_page_size = kv.swa_window_size = 128
        kv.page_size = pool.page_size
        return kv

    def model_runner(self, pool: ReqToTokenPool, spec: SpecInfo | None) -> SimpleNamespace:
        args = self.server_args(spec)
        self.modules[CONTEXT].get_context().set_server_args(args)
        algorithm = self.modules[SPEC].SpeculativeAlgorithm
        return SimpleNamespace(
            device=self.device,
            model_config=SimpleNamespace(
                head_dim=HEAD_DIM,
                context_len=pool.cfg.context_len,
                v_head_dim=HEAD_DIM,
                hf_text_config=SimpleNamespace(index_topk=INDEX_TOPK),
            ),
            page_size=pool.page_size,
            req_to_token_pool=SimpleNamespace(req_to_token=pool.req_to_token),
            token_to_kv_pool=self.kv_pool(pool),
            hisparse_coordinator=None,
            server_args=args,
            spec_algorithm=algorithm.EAGLE if spec else algorithm.NONE,
            is_draft_worker=False,
        )

    def backend(self, pool: ReqToTokenPool, spec: SpecInfo | None, **kwargs: Any) -> Any:
        runner = self.model_runner(pool, spec)
        return self.backend_module.DeepseekV4AttnBackend(runner, **kwargs)

    def multistep(self, pool: ReqToTokenPool, spec: SpecInfo) -> Any:
        runner = self.model_runner(pool, spec)
        return self.backend_module.DeepseekV4MultiStepBackend(runner, spec.topk, spec.num_steps)

    def batch(self, ours: ForwardBatch, *, draft_decode: bool = False) -> Any:
        """Upstream's ForwardBatch over the model batch's tensors."""
        info = self.modules[BATCH_INFO]
        mode = getattr(info.ForwardMode, _MODES[ours.forward_mode])
        n = ours.num_tokens
        fb = info.ForwardBatch(
            forward_mode=mode,
            batch_size=ours.batch_size,
            input_ids=torch.zeros(n, dtype=torch.int64, device=self.device),
            req_pool_indices=ours.req_pool_indices,
            seq_lens=ours.seq_lens,
            out_cache_loc=ours.out_cache_loc,
            seq_lens_sum=ours.seq_lens_sum,
            seq_lens_cpu=ours.seq_lens_cpu,
            extend_seq_lens=ours.extend_seq_lens,
            extend_seq_lens_cpu=ours.extend_seq_lens_cpu,
            extend_start_loc=ours.extend_start_loc,
            positions=torch.zeros(n, dtype=torch.int64, device=self.device),
        )
        if ours.spec_info is not None:
            # what the backend reads of EAGLE's verify input (no ragged verify: the default)
            fb.spec_info = SimpleNamespace(
                draft_token_num=ours.spec_info.draft_token_num,
                draft_token=None,
                ragged_verify_layout=None,
            )
        return fb


_MODES = {
    ForwardMode.DECODE: "DECODE",
    ForwardMode.TARGET_VERIFY: "TARGET_VERIFY",
    ForwardMode.DRAFT_EXTEND: "DRAFT_EXTEND_V2",
    ForwardMode.EXTEND: "EXTEND",
    ForwardMode.IDLE: "IDLE",
}
