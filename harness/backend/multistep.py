"""The multi-step draft backend: one inner backend per EAGLE draft step.

As upstream: eagerly, the first ``num_steps - 1`` inner backends each run
``init_forward_metadata`` (the last step only samples and writes no KV). Out of graph on
replay, only the first inner backend builds; steps 1 .. num_steps-2 copy its metadata into
their captured objects. During capture every inner backend runs its own out-of-graph work.
In graph, every inner backend upgrades its metadata.
"""

from __future__ import annotations

import torch

from harness.backend.backend import DeepseekV4AttnBackend, GraphBucket
from harness.backend.config import BackendConfig
from harness.backend.metadata import FullMetadata
from harness.backend.variants import VariantPolicy
from harness.batch.info import ForwardBatch
from harness.batch.pool import ReqToTokenPool
from syncledger import region


class MultiStepDraftBackend:
    def __init__(
        self,
        num_steps: int,
        config: BackendConfig,
        pool: ReqToTokenPool,
        device: torch.device,
        variant: str | VariantPolicy | None = None,
        *,
        topk: int = 1,
    ):
        assert num_steps >= 1 and topk == 1, "DeepSeek-V4 MTP supports topk 1 only"
        self.num_steps = num_steps
        self.topk = topk
        self.attn_backends = [
            DeepseekV4AttnBackend(
                config, pool, device, variant, step_id=i, draft_steps=num_steps, draft_topk=topk
            )
            for i in range(num_steps)
        ]

    @property
    def needs_cpu_seq_lens(self) -> bool:
        return self.attn_backends[0].needs_cpu_seq_lens

    @property
    def variant(self) -> str:
        return self.attn_backends[0].variant

    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        for backend in self.attn_backends[: self.num_steps - 1]:
            backend.init_forward_metadata(batch)

    def init_forward_metadata_out_graph(
        self, batch: ForwardBatch, in_capture: bool = False
    ) -> None:
        if in_capture:
            for backend in self.attn_backends:
                backend.init_forward_metadata_out_graph(batch, in_capture=True)
            return
        if self.num_steps == 1:
            return
        first = self.attn_backends[0]
        first.init_forward_metadata_out_graph(batch)
        temp = first.forward_metadata
        with region("metadata", "copy"):
            for backend in self.attn_backends[1 : self.num_steps - 1]:
                backend.replay_cuda_graph_metadata_from(
                    batch.batch_size, temp, GraphBucket.DECODE_OR_IDLE
                )

    def init_forward_metadata_in_graph(self, batch: ForwardBatch) -> None:
        for backend in self.attn_backends:
            backend.init_forward_metadata_in_graph(batch)

    def on_after_cuda_graph_warmup(self) -> None:
        for backend in self.attn_backends:
            backend.on_after_cuda_graph_warmup()

    def step_metadata(self) -> list[FullMetadata | None]:
        """The metadata of the steps that write KV (0 .. num_steps-2)."""
        return [b.forward_metadata for b in self.attn_backends[: self.num_steps - 1]]  # type: ignore[misc]
