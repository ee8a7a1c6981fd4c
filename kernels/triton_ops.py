"""Registry entry "triton": Triton kernels, with a path that works on every device.

Path per call, chosen from the device that holds the first tensor argument's memory (host-side
metadata, no sync):
* cuda                                  -> Triton kernels;
* cpu with TRITON_INTERPRET=1 set before triton was imported -> Triton kernels, interpreted;
* anything else (the harness's emulated device, whose memory is `meta` to PyTorch's C++ side
  whatever it reports to Python; CPU without the interpreter) -> the PyTorch reference.
triton itself is imported only when a Triton path is first taken.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import ModuleType

import torch
from torch import Tensor

from kernels import reference as ref
from kernels.api import (
    KV_PAGE_SIZE,
    SWA_WINDOW,
    TOPK_CLUSTER_THRESHOLD,
    FullMetadataTensors,
    UpgradeInputs,
)


def _memory_device_type(t: Tensor) -> str:
    # the device that holds the memory, as PyTorch's C++ side sees it: a tensor subclass may
    # report another `.device` to Python (the harness's emulated device reads "cuda" there)
    return torch._C.TensorBase.device.__get__(t).type


def triton_path_for(t: Tensor) -> bool:
    """Whether ops on tensors like `t` take the Triton kernels (else the reference)."""
    kind = _memory_device_type(t)
    if kind == "cuda":
        want_interpreted = False
    elif kind == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        want_interpreted = True
    else:
        return False
    # The kernels are built once, for the interpreter or for the GPU, when first imported;
    # a process that mixes both (e.g. CPU interpreter tests then CUDA tests) gets the
    # reference for the other kind rather than a crash or an interpreter on device memory.
    launch = sys.modules.get("kernels.triton_launch")
    if launch is None or want_interpreted == launch.INTERPRETED:
        return True
    if not _warned:
        _warned.append(True)
        warnings.warn(
            f"kernels: Triton kernels were built {'for the interpreter' if launch.INTERPRETED else 'for the GPU'}; "
            f"{kind} tensors take the PyTorch reference in this process",
            stacklevel=3,
        )
    return False


_warned: list[bool] = []


def _impl() -> ModuleType:
    from kernels import triton_launch  # imports triton

    return triton_launch


class TritonOps:
    """Triton kernels; see the module doc for the per-device path."""

    name = "triton"

    def expand_lengths(
        self, base_lens: Tensor, extend_lens: Tensor | int, num_tokens: int
    ) -> tuple[Tensor, Tensor]:
        if not triton_path_for(base_lens):
            return ref.expand_lengths(base_lens, extend_lens, num_tokens)
        return _impl().expand_lengths(base_lens, extend_lens, num_tokens)

    def page_table(
        self,
        req_to_token: Tensor,
        token_pool_idx: Tensor,
        num_pages: int,
        page_size: int = KV_PAGE_SIZE,
    ) -> Tensor:
        if not triton_path_for(req_to_token):
            return ref.page_table(req_to_token, token_pool_idx, num_pages, page_size)
        return _impl().page_table(req_to_token, token_pool_idx, num_pages, page_size)

    def swa_indices(
        self,
        req_to_token: Tensor,
        token_pool_idx: Tensor,
        seq_lens_casual: Tensor,
        full_to_swa: Tensor,
        window: int = SWA_WINDOW,
    ) -> tuple[Tensor, Tensor]:
        args = (req_to_token, token_pool_idx, seq_lens_casual, full_to_swa, window)
        if not triton_path_for(req_to_token):
            return ref.swa_indices(*args)
        return _impl().swa_indices(*args)

    def compression(
        self, seq_lens_casual: Tensor, out_cache_loc: Tensor, ratio: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        if not triton_path_for(seq_lens_casual):
            return ref.compression(seq_lens_casual, out_cache_loc, ratio)
        return _impl().compression(seq_lens_casual, out_cache_loc, ratio)

    def c128_page_indices(
        self,
        req_to_token: Tensor,
        token_pool_idx: Tensor,
        seq_lens_casual: Tensor,
        num_pages: int,
        page_size: int = KV_PAGE_SIZE,
    ) -> Tensor:
        args = (req_to_token, token_pool_idx, seq_lens_casual, num_pages, page_size)
        if not triton_path_for(req_to_token):
            return ref.c128_page_indices(*args)
        return _impl().c128_page_indices(*args)

    def sparse_buffers(
        self, c4_topk_lengths_clamp1: Tensor, index_topk: int
    ) -> tuple[Tensor, Tensor]:
        if not triton_path_for(c4_topk_lengths_clamp1):
            return ref.sparse_buffers(c4_topk_lengths_clamp1, index_topk)
        return _impl().sparse_buffers(c4_topk_lengths_clamp1, index_topk)

    def topk_schedule(
        self, c4_topk_lengths_raw: Tensor, threshold: int = TOPK_CLUSTER_THRESHOLD
    ) -> Tensor:
        if not triton_path_for(c4_topk_lengths_raw):
            return ref.topk_schedule(c4_topk_lengths_raw, threshold)
        return _impl().topk_schedule(c4_topk_lengths_raw, threshold)

    def swa_out_cache_loc(self, out_cache_loc: Tensor, full_to_swa: Tensor) -> Tensor:
        if not triton_path_for(out_cache_loc):
            return ref.swa_out_cache_loc(out_cache_loc, full_to_swa)
        return _impl().swa_out_cache_loc(out_cache_loc, full_to_swa)

    def upgrade(self, inputs: UpgradeInputs) -> FullMetadataTensors:
        if not triton_path_for(inputs.seq_lens):
            return ref.upgrade(inputs)
        return _impl().upgrade(inputs)
