"""Upstream's own backend objects, built around the model's pool and batches.

`UpstreamWorld` holds a loaded tree's modules and makes what upstream's backend is handed in
serving: a model runner (the attributes the backend's constructor reads), upstream's
``DeepSeekV4TokenToKVPool`` holding the model pool's full-to-SWA mapping, and upstream's
``ForwardBatch`` carrying the model batch's own tensors.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from harness.batch.info import ForwardBatch, ForwardMode, SpecInfo
from harness.batch.pool import ReqToTokenPool
from harness.upstream.loader import MissingAttribute, caller

BACKEND = "sglang.srt.layers.attention.deepseek_v4_backend"
BATCH_INFO = "sglang.srt.model_executor.forward_batch_info"
POOL = "sglang.srt.mem_cache.deepseek_v4_memory_pool"
CONTEXT = "sglang.srt.runtime_context"
SPEC = "sglang.srt.speculative.spec_info"
SERVER_ARGS = "sglang.srt.server_args"
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


def _missing(self: Any, name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise MissingAttribute(
        f"{caller()} reads {self._what}.{name}, which the harness's stand-in lacks"
    )


class Handed(SimpleNamespace):
    """What upstream is handed in place of a part of the server (the model runner, its model
    config, a batch's speculative input): reading an attribute it lacks is tree drift, one line
    naming upstream's reading line, not the cell's outcome."""

    def __init__(self, what: str, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._what = what

    __getattr__ = _missing


def handed_instance(cls: type, what: str, **attrs: Any) -> Any:
    """An instance of upstream's class `cls` built without its constructor, holding `attrs`:
    its methods run as upstream's, and reading an attribute it lacks is tree drift."""
    strict = type(cls.__name__, (cls,), {"__getattr__": _missing})
    obj = strict.__new__(strict)
    vars(obj).update(attrs, _what=what)
    return obj


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

    def kv_pool(self, pool: ReqToTokenPool) -> Any:
        """Upstream's pool class around the model's mapping. Upstream's mapping has one slot
        more than the pool, holding -1: a masked slot index of -1 maps to it."""
        sentinel = torch.full((1,), -1, dtype=pool.full_to_swa.dtype, device=self.device)
        # the C4 indexer's pool: one key per 4 tokens (its page holds a KV page's keys)
        indexer = Handed("indexer_pool", page_size=pool.page_size // 4)
        return handed_instance(
            self.modules[POOL].DeepSeekV4TokenToKVPool,
            "token_to_kv_pool",
            full_to_swa_index_mapping=torch.cat([pool.full_to_swa, sentinel]),
            swa_page_size=128,
            swa_window_size=128,
            page_size=pool.page_size,
            c4_indexer_kv_pool=indexer,  # up to 0.5.19
            index_pools={4: indexer},  # 0.5.20 on
            present_ratios=(4, 128),  # 0.5.21 on: the compressed pools of V4 Flash's layers
            request_window=None,  # 0.5.21 on: set only under encoder replay (off by default)
            _unified_kv=False,  # 0.5.20 on: the request-addressed C4 state is ROCm's only
        )

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
            fb.spec_info = Handed(
                "spec_info",
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
