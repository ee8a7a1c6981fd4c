"""The per-step all-gather of DP attention, over gloo on host tensors or NCCL on device tensors.

sglang 504570f4 picks the group in ``prepare_mlp_sync_batch_raw`` (dp_attn.py:198-206): the
device group (NCCL, device tensors) with ``--disable-overlap-schedule`` or
``SGLANG_NCCL_ALL_GATHER_IN_OVERLAP_SCHEDULER_SYNC_BATCH``, else the gloo CPU group on host
tensors. The overlap scheduler is on by default (scheduler.py:342) and the variable defaults to
off (environ.py:363), so served deployments gather over gloo with the overlap scheduler; NCCL's
default route is ``--disable-overlap-schedule``, the normal loop (scheduler.py:1531-1558).

``MLPSyncBatchInfo.all_gather`` (dp_attn.py:83-113) runs the same code on either device: the
local record and the fallback record are built from host lists (l.54, l.68-81: on the device a
blocking copy each), gathered into a (ranks, 1, 7) tensor, inactive ranks' rows overwritten
through a boolean mask (l.101-103: on the device a nonzero), then read back: the token counts
with one ``.cpu()`` (l.108), three flags with ``.item()`` (l.111-113), and two-batch overlap's
``compute_output`` copies its two columns with another ``.cpu()`` (two_batch_overlap.py:451).
The fidelity table's rows D02-D09 trace each of them, at every commit.
On host tensors none of this waits for the device; on device tensors every one of them does.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist

from harness.dp.backends import ExchangeBackend
from harness.dp.record import FALLBACK_RECORD, RECORD_LEN, Gathered, SyncRecord
from syncledger import host_values, is_emulated

# Newer torch renames upstream's collective; the call stays upstream's.
warnings.filterwarnings(
    "ignore", message=".*all_gather_into_tensor.* is deprecated", category=FutureWarning
)


class MLPSyncExchange:
    """One rank's side of the step's all-gather over ``group`` (``ranks`` members)."""

    def __init__(
        self, backend: ExchangeBackend, group: Any, device: torch.device, ranks: int
    ) -> None:
        self.backend = backend
        self.group = group
        self.ranks = ranks
        self.device = device if backend.device_tensors else torch.device("cpu")
        # which ranks take part (elastic EP can drop some); made once, as the group's attribute
        self.active_ranks = torch.ones(ranks, dtype=torch.int32, device=self.device)

    def all_gather_may_d2h(self, record: SyncRecord) -> Gathered:
        """Every rank's record, and what the ranks decide from them (dp_attn.py:83-113)."""
        dev = self.device
        local = torch.tensor(record.values(), dtype=torch.int64, device=dev)  # fidelity: D02
        fallback = torch.tensor(FALLBACK_RECORD, dtype=torch.int64, device=dev)  # fidelity: D03
        global_info = torch.empty((self.ranks, 1, RECORD_LEN), dtype=torch.int64, device=dev)
        all_gather_into_tensor(global_info, local, self.group)
        inactive = self.active_ranks == 0
        global_info.view(self.ranks, RECORD_LEN)[inactive] = fallback  # fidelity: D04
        return read_back_may_d2h(global_info)


def all_gather_into_tensor(out: torch.Tensor, local: torch.Tensor, group: Any) -> None:
    """``torch.distributed.all_gather_into_tensor`` (dp_attn.py:83-95). Without a GPU the
    NCCL variant's device tensors live on the emulated device, and their values travel through
    a gloo group: on a GPU, NCCL only queues the collective on the stream (no host wait), so the
    ledger sees the same thing in both places, the read-backs that follow."""
    if is_emulated(out):
        dist.all_gather_into_tensor(host_values(out).view(-1), host_values(local), group=group)
    else:
        dist.all_gather_into_tensor(out.view(-1), local, group=group)


def read_back_may_d2h(global_info: torch.Tensor) -> Gathered:
    """What the ranks decide from the gathered records (dp_attn.py:105-113): the same values on
    every rank. On device tensors each read below waits for the device."""
    tp0_info = global_info[:, 0, :]
    # "only one Device-to-Host (D2H) memory copy"; the lists below are of the host copy
    cpu_data = tp0_info[:, :2].cpu()  # fidelity: D05
    global_num_tokens = tuple(int(n) for n in cpu_data[:, 0].tolist())
    for_logprob = tuple(int(n) for n in cpu_data[:, 1].tolist())
    can_cuda_graph = bool(tp0_info[:, 2].min().item())  # fidelity: D06
    is_extend_in_batch = bool(tp0_info[:, 3].max().item())  # fidelity: D07
    can_run_breakable_cuda_graph = bool(tp0_info[:, 6].min().item())  # fidelity: D08
    # compute_output(tp0_info[:, 4:6]) copies its two columns even with two-batch overlap off
    tp0_info[:, 4:6][:, :2].cpu()  # fidelity: D09
    return Gathered(
        global_num_tokens,
        can_cuda_graph,
        is_extend_in_batch,
        can_run_breakable_cuda_graph,
        for_logprob,
    )
