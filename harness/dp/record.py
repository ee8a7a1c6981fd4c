"""The record DP-attention ranks exchange every step, and what they read back from it.

sglang 504570f4, ``managers/scheduler_components/dp_attn.py``:
- each rank contributes 7 int64 (``_get_local_tensor``, l.53-66): num_tokens,
  num_tokens_for_logprob, can_cuda_graph, is_extend_in_batch, local_can_run_tbo,
  local_forward_mode, can_run_breakable_cuda_graph;
- num_tokens (l.156-175): 0 without a batch, the request count of a decode batch, the extend
  tokens of an extend batch; can_cuda_graph (l.182-186): no batch, or a decode or idle batch,
  with CUDA graphs enabled; can_run_breakable_cuda_graph (l.187-191): an extend batch with
  graphs enabled; is_extend_in_batch (l.193);
- two-batch overlap is off in the modelled deployments: its preparer reports
  ``False, forward_mode`` (two_batch_overlap.py:408-410), IDLE without a batch;
- after the gather (l.105-113) every rank reads the same values: the token counts of all
  ranks, can_cuda_graph as the minimum over ranks, is_extend_in_batch as the maximum, the
  breakable-graph flag as the minimum; a rank with no batch runs an IDLE batch when any rank
  has tokens (l.237-245).

Without logprob requests a rank samples one token per request, so num_tokens_for_logprob
carries num_tokens for decode batches and the request count for extend batches; no decision
here reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.batch.info import DPGlobalInfo, ForwardMode

# IntEnum auto() values of upstream's forward modes (forward_batch_info.py:77-101)
FORWARD_MODE_CODE = {ForwardMode.EXTEND: 1, ForwardMode.DECODE: 2, ForwardMode.IDLE: 4}
RECORD_LEN = 7
# the row an inactive rank's slot is overwritten with (dp_attn.py:68-81)
FALLBACK_RECORD = (0, 0, 1, 0, 1, FORWARD_MODE_CODE[ForwardMode.IDLE], 0)


@dataclass(frozen=True)
class SyncRecord:
    """One rank's contribution to the step's exchange (host values)."""

    num_tokens: int
    num_tokens_for_logprob: int
    can_cuda_graph: bool
    is_extend_in_batch: bool
    local_can_run_tbo: bool
    local_forward_mode: int
    can_run_breakable_cuda_graph: bool

    def values(self) -> list[int]:
        """In the order of ``_get_local_tensor`` (dp_attn.py:53-66)."""
        return [
            self.num_tokens,
            self.num_tokens_for_logprob,
            int(self.can_cuda_graph),
            int(self.is_extend_in_batch),
            int(self.local_can_run_tbo),
            self.local_forward_mode,
            int(self.can_run_breakable_cuda_graph),
        ]


def local_record(
    mode: ForwardMode | None, num_tokens: int, num_requests: int, cuda_graph: bool
) -> SyncRecord:
    """The record of a rank whose batch this step has ``mode`` (None: no batch)."""
    extend = mode is ForwardMode.EXTEND
    if mode is not None and not (extend or mode is ForwardMode.DECODE):
        raise ValueError(f"a scheduler batch is DECODE or EXTEND, not {mode.name}")
    tokens = num_tokens if mode is not None else 0
    return SyncRecord(
        num_tokens=tokens,
        num_tokens_for_logprob=num_requests if extend else tokens,
        can_cuda_graph=cuda_graph and not extend,
        is_extend_in_batch=extend,
        local_can_run_tbo=False,
        local_forward_mode=FORWARD_MODE_CODE[mode or ForwardMode.IDLE],
        can_run_breakable_cuda_graph=cuda_graph and extend,
    )


@dataclass(frozen=True)
class Gathered:
    """What every rank read back from the step's exchange (the same on every rank)."""

    global_num_tokens: tuple[int, ...]
    can_cuda_graph: bool
    is_extend_in_batch: bool
    can_run_breakable_cuda_graph: bool
    global_num_tokens_for_logprob: tuple[int, ...] = ()

    @property
    def need_idle_batch(self) -> bool:
        """A rank without a batch runs an IDLE one when any rank has tokens (dp_attn.py:237)."""
        return max(self.global_num_tokens) > 0

    def global_info(self) -> DPGlobalInfo:
        """What every batch of the step carries (dp_attn.py:118-140)."""
        return DPGlobalInfo(
            self.global_num_tokens,
            self.can_cuda_graph,
            self.is_extend_in_batch,
            self.global_num_tokens_for_logprob,
        )
