"""Upstream's own objects, built around the model's pool and batches.

`UpstreamWorld` holds a loaded tree's modules and makes what upstream's code is handed in
serving: a model runner (the attributes the backend's constructor reads, the server's arguments
at upstream's defaults), upstream's ``DeepSeekV4TokenToKVPool`` around the model pool
(harness.upstream.kv_pool), upstream's ``ForwardBatch`` carrying the model batch's own tensors,
and the scheduler's side of the spec-v2 relay (upstream's ``FutureMap``, its flag from
upstream's own ``decide_needs_cpu_seq_lens``).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from harness.batch.info import ForwardBatch, ForwardMode, SpecInfo
from harness.batch.pool import ReqToTokenPool
from harness.upstream.handed import Handed
from harness.upstream.kv_pool import LAYER_OF_RATIO, kv_pool

BACKEND = "sglang.srt.layers.attention.deepseek_v4_backend"
BATCH_INFO = "sglang.srt.model_executor.forward_batch_info"
POOL = "sglang.srt.mem_cache.deepseek_v4_memory_pool"
CONTEXT = "sglang.srt.runtime_context"
SPEC = "sglang.srt.speculative.spec_info"
SERVER_ARGS = "sglang.srt.server_args"
OVERLAP = "sglang.srt.managers.overlap_utils"
MODULES = (BACKEND, BATCH_INFO, POOL, CONTEXT, SPEC, SERVER_ARGS, OVERLAP)
# upstream decides with `_is_cuda` at import (torch.version.cuda); the emulated device is CUDA
CUDA_GATED = (BACKEND, OVERLAP)
PREP_FLAG = "SGLANG_PREP_IN_CUDA_GRAPH"
HEAD_DIM = 512
INDEX_TOPK = 512  # Flash
HEADS = 1  # query heads of the sparse prefill's attention (stood in: only the token count counts)


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


def default_server_args(cls: type) -> Any:
    """Upstream's own ``ServerArgs`` with every field at its declared default, unresolved: a
    dataclass up to 0.5.19 (built without its ``__post_init__``, which inspects the machine and
    the model), a msgspec Struct from 0.5.20 (whose construction resolves nothing)."""
    if dataclasses.is_dataclass(cls):
        args = cls.__new__(cls)
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = None  # a required field (the model path): never read on these paths
            object.__setattr__(args, f.name, value)
        return args
    import msgspec

    return cls(**{f.name: None for f in msgspec.structs.fields(cls) if f.required})


def publish_server_args(modules: dict[str, ModuleType], args: Any) -> None:
    """Where the tree's code reads the server's arguments from, beside the model runner: the
    runtime context (0.5.15 on), the module-global (up to 0.5.14)."""
    context = modules[CONTEXT].get_context()
    if hasattr(context, "set_server_args"):
        context.set_server_args(args)
    setter = getattr(modules[SERVER_ARGS], "set_global_server_args_for_scheduler", None)
    if setter is not None and not hasattr(context, "set_server_args"):
        setter(args)


@dataclass
class UpstreamWorld:
    modules: dict[str, ModuleType]
    device: torch.device

    @property
    def backend_module(self) -> ModuleType:
        return self.modules[BACKEND]

    def server_args(self, spec: SpecInfo | None) -> Any:
        args = default_server_args(self.modules[SERVER_ARGS].ServerArgs)
        args.speculative_algorithm = "EAGLE" if spec else None
        args.speculative_eagle_topk = spec.topk if spec else None
        args.speculative_num_draft_tokens = spec.draft_token_num if spec else None
        args.speculative_num_steps = spec.num_steps if spec else None
        return args

    def model_runner(self, pool: ReqToTokenPool, spec: SpecInfo | None) -> Handed:
        args = self.server_args(spec)
        publish_server_args(self.modules, args)
        algorithm = self.modules[SPEC].SpeculativeAlgorithm
        return Handed(
            "model_runner",
            device=self.device,
            model_config=Handed(
                "model_config",
                head_dim=HEAD_DIM,
                context_len=pool.cfg.context_len,
                v_head_dim=HEAD_DIM,
                hf_text_config=Handed("hf_text_config", index_topk=INDEX_TOPK),
            ),
            page_size=pool.page_size,
            req_to_token_pool=Handed("req_to_token_pool", req_to_token=pool.req_to_token),
            token_to_kv_pool=kv_pool(self.modules[POOL].DeepSeekV4TokenToKVPool, pool, self.device),
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

    def sparse_prefill(self, be: Any, fb: Any, ratios: tuple[int, ...]) -> int:
        """A prefill forward's attention layers at `ratios`, through upstream's
        ``_forward_prefill_sparse`` after an eager build; returns the SWA workspace's tokens."""
        n = int(fb.out_cache_loc.shape[0])
        q = torch.zeros(n, 1, HEADS, HEAD_DIM, dtype=torch.bfloat16, device=self.device)
        sink = torch.zeros(HEADS, dtype=torch.float32, device=self.device)
        md = be.forward_metadata
        for ratio in ratios:
            be._forward_prefill_sparse(
                q=q,
                layer_id=LAYER_OF_RATIO[ratio],
                compress_ratio=ratio,
                forward_batch=fb,
                token_to_kv_pool=be.token_to_kv_pool,
                core_attn_metadata=md.core_attn_metadata,
                attn_sink=sink,
            )
        return int(md.sparse_prefill_cache.swa_token_ids.shape[0])

    def future_map(self, pool: ReqToTokenPool, spec: SpecInfo, backends: tuple) -> Any:
        """The scheduler's relay, its flag decided by upstream over the attention backends a
        spec-v2 forward touches (EAGLE v2's ``spec_v2_attn_backends``)."""
        overlap = self.modules[OVERLAP]
        decide = overlap.decide_needs_cpu_seq_lens
        # up to 0.5.18 it is handed the server's arguments; later it reads the runtime context
        if "server_args" in inspect.signature(decide).parameters:
            flag = decide(self.server_args(spec), backends)
        else:
            flag = decide(backends)
        return overlap.FutureMap(
            self.device,
            self.modules[SPEC].SpeculativeAlgorithm.EAGLE,
            Handed("req_to_token_pool", req_to_token=pool.req_to_token),
            needs_cpu_seq_lens=flag,
        )

    def schedule_batch(self, ours: ForwardBatch, rows: list[int]) -> Handed:
        """What the relay reads of a spec-v2 decode batch: its future indices (its rows)."""
        return Handed(
            "schedule_batch",
            spec_info=Handed("spec_info", future_indices=ours.req_pool_indices),
            req_pool_indices=ours.req_pool_indices,
            req_pool_indices_cpu=torch.tensor(rows, dtype=torch.int64),
            seq_lens=ours.seq_lens,
            seq_lens_cpu=None,
            seq_lens_sum=None,
        )

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
            fb.spec_info = Handed(
                "spec_info",
                draft_token_num=ours.spec_info.draft_token_num,
                draft_token=None,
                ragged_verify_layout=None,
            )
        return fb


@contextmanager
def emulated_device_module() -> Iterator[None]:
    """``torch.get_device_module`` answers ``torch.cuda`` for the emulated device (reported
    as "meta"), whose streams and events are torch.cuda's emulated ones."""
    original = torch.get_device_module

    def device_module(device: Any = None) -> Any:
        if device is not None and torch.device(device).type == "meta":
            return torch.cuda
        return original(device)

    torch.get_device_module = device_module
    try:
        yield
    finally:
        torch.get_device_module = original


_MODES = {
    ForwardMode.DECODE: "DECODE",
    ForwardMode.TARGET_VERIFY: "TARGET_VERIFY",
    ForwardMode.DRAFT_EXTEND: "DRAFT_EXTEND_V2",
    ForwardMode.EXTEND: "EXTEND",
    ForwardMode.IDLE: "IDLE",
}
