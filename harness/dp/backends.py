"""The exchange backends a DP scenario may name: free of torch, so a scenario is validated
without it (harness.dp.exchange runs them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExchangeBackend:
    name: str
    device_tensors: bool  # the record lives on the device (NCCL) or on the host (gloo)
    overlap: bool  # the scheduler loop it comes with: True = process step N-1 after launching N
    gpu_group: str  # the torch.distributed backend of its group on GPUs


EXCHANGE_BACKENDS: dict[str, ExchangeBackend] = {
    b.name: b
    for b in (
        ExchangeBackend("gloo", device_tensors=False, overlap=True, gpu_group="gloo"),
        ExchangeBackend("nccl", device_tensors=True, overlap=False, gpu_group="nccl"),
    )
}
