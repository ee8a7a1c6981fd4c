"""Forward modes, speculative info and the forward batch the attention backend reads.

Conventions (as in sglang):
- ``seq_lens`` (device, int64 [bs]) is each request's KV length *after* this forward for DECODE,
  EXTEND and DRAFT_EXTEND (the new tokens are included), and the committed length *before* the
  draft tokens for TARGET_VERIFY (verify token k of a request of length L sees L + k + 1).
- ``seq_lens_cpu`` is the optional host mirror of ``seq_lens`` (int64 CPU tensor) and
  ``seq_lens_sum`` its sum; both are None when the mirror is absent.
- ``out_cache_loc`` (device, int64 [N]) holds the full-space KV slot of each query token.
- ``extend_seq_lens`` (device, int32 [bs]) / ``extend_seq_lens_cpu`` (host list) give the number
  of query tokens per request for EXTEND and DRAFT_EXTEND; ``extend_start_loc`` (device) is
  where each request's tokens start (sglang's ``compute_position`` sets it for every
  extend-like batch, so the backend takes its vectorized expansion).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import torch


class ForwardMode(enum.Enum):
    DECODE = "DECODE"
    TARGET_VERIFY = "TARGET_VERIFY"
    DRAFT_EXTEND = "DRAFT_EXTEND"
    EXTEND = "EXTEND"
    IDLE = "IDLE"

    def is_decode(self) -> bool:
        return self is ForwardMode.DECODE

    def is_target_verify(self) -> bool:
        return self is ForwardMode.TARGET_VERIFY

    def is_draft_extend(self) -> bool:
        return self is ForwardMode.DRAFT_EXTEND

    def is_prefill(self) -> bool:
        """EXTEND proper (prefill chunk), not draft-extend."""
        return self is ForwardMode.EXTEND

    def is_extend_like(self) -> bool:
        """Modes whose tokens per request come from ``extend_seq_lens``."""
        return self in (ForwardMode.EXTEND, ForwardMode.DRAFT_EXTEND)

    def is_idle(self) -> bool:
        return self is ForwardMode.IDLE

    def is_decode_or_idle(self) -> bool:
        return self in (ForwardMode.DECODE, ForwardMode.IDLE)


@dataclass(frozen=True)
class SpecInfo:
    """Speculative-decoding shape of a batch (EAGLE, topk 1 in the modelled setups)."""

    draft_token_num: int = 4
    num_steps: int = 3
    topk: int = 1


@dataclass(frozen=True)
class DPGlobalInfo:
    """What the DP-attention ranks exchanged for this step, as upstream sets it on every batch
    of the step (``_update_gather_batch``, dp_attn.py:118-140): each rank's token count (a
    decode batch counts its requests, dp_attn.py:156-175), whether every rank can replay a CUDA
    graph (the minimum over ranks) and whether any rank extends (the maximum); and each rank's
    tokens that want logprobs (empty: the same as its tokens)."""

    global_num_tokens: tuple[int, ...]
    can_run_dp_cuda_graph: bool
    is_extend_in_batch: bool
    global_num_tokens_for_logprob: tuple[int, ...] = ()

    @property
    def num_tokens_for_logprob(self) -> tuple[int, ...]:
        return self.global_num_tokens_for_logprob or self.global_num_tokens


@dataclass
class ForwardBatch:
    forward_mode: ForwardMode
    batch_size: int
    seq_lens: torch.Tensor
    req_pool_indices: torch.Tensor
    out_cache_loc: torch.Tensor
    seq_lens_cpu: torch.Tensor | None = None
    seq_lens_sum: int | None = None
    extend_seq_lens: torch.Tensor | None = None
    extend_seq_lens_cpu: list[int] | None = None
    extend_start_loc: torch.Tensor | None = None
    spec_info: SpecInfo | None = None
    dp: DPGlobalInfo | None = None  # DP attention only

    @property
    def device(self) -> torch.device:
        return self.seq_lens.device

    @property
    def num_tokens(self) -> int:
        """Query tokens of this forward (host-known, never a device read)."""
        return int(self.out_cache_loc.shape[0])


def host_to_device_async(values: Sequence[int], dtype: torch.dtype, device: torch.device):
    """A small host list to the device without a sync: pinned staging + non-blocking copy.
    (A plain-CPU target needs no staging; CPU-only PyTorch builds cannot pin.)"""
    staged = torch.tensor(list(values), dtype=dtype, pin_memory=device.type != "cpu")
    return staged.to(device, non_blocking=True)


def pageable_to_device_nonblocking(
    values: Sequence[int], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """A host list to the device the way parts of sglang do it: from pageable memory with
    ``non_blocking=True``. The driver stages the bytes; below its staging threshold the host
    does not wait, but it is a hazard that grows with the batch (the ledger shows it)."""
    return torch.tensor(list(values), dtype=dtype).to(device, non_blocking=True)


def extend_start_loc_of(extend_seq_lens: torch.Tensor) -> torch.Tensor:
    """First token of each request in an extend-like batch (device-only, as sglang's
    ``compute_position``)."""
    lens = extend_seq_lens.to(torch.int64)
    return torch.cumsum(lens, 0) - lens


def make_batch(
    mode: ForwardMode,
    *,
    seq_lens: Sequence[int],
    req_pool_indices: Sequence[int],
    out_cache_loc: Sequence[int] | torch.Tensor,
    device: torch.device,
    extend_lens: Sequence[int] | None = None,
    spec: SpecInfo | None = None,
    mirror: bool = True,
) -> ForwardBatch:
    """Build a batch from host values (tests, examples, GPU checks). Transfers are pinned and
    non-blocking, so building a batch makes no sync. ``out_cache_loc`` may already be a device
    tensor (e.g. gathered from ``req_to_token`` on the device)."""
    bs = len(seq_lens)
    assert len(req_pool_indices) == bs
    if isinstance(out_cache_loc, torch.Tensor):
        loc = out_cache_loc
    else:
        loc = host_to_device_async(out_cache_loc, torch.int64, device)
    ext_dev = ext_cpu = start_loc = None
    if mode.is_extend_like():
        assert extend_lens is not None and len(extend_lens) == bs
        ext_cpu = [int(x) for x in extend_lens]
        ext_dev = host_to_device_async(ext_cpu, torch.int32, device)
        start_loc = extend_start_loc_of(ext_dev)
    return ForwardBatch(
        forward_mode=mode,
        batch_size=bs,
        seq_lens=host_to_device_async(seq_lens, torch.int64, device),
        req_pool_indices=host_to_device_async(req_pool_indices, torch.int64, device),
        out_cache_loc=loc,
        seq_lens_cpu=torch.tensor(list(seq_lens), dtype=torch.int64) if mirror else None,
        seq_lens_sum=int(sum(seq_lens)) if mirror else None,
        extend_seq_lens=ext_dev,
        extend_seq_lens_cpu=ext_cpu,
        extend_start_loc=start_loc,
        spec_info=spec,
    )
