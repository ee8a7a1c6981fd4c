"""The two sides a cell runs on: the model's backend and upstream's, behind one interface."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from harness.backend import BackendConfig, DeepseekV4AttnBackend, MultiStepDraftBackend
from harness.batch.info import ForwardBatch, SpecInfo
from harness.batch.pool import ReqToTokenPool
from harness.upstream.loader import drift_of
from harness.upstream.world import UpstreamWorld, prep_in_graph

# the metadata tensors torch computes on both sides, compared value for value
VALUE_FIELDS = ("page_table", "seq_lens_casual", "positions_casual", "swa_page_indices")


@dataclass
class ModelSide:
    variant: str
    device: torch.device
    name: str = "model"

    def backend(self, pool: ReqToTokenPool, spec: SpecInfo | None, prep: bool) -> Any:
        cfg = BackendConfig(variant=self.variant, prep_in_graph=prep, spec=spec)
        return DeepseekV4AttnBackend(cfg, pool, self.device)

    def multistep(self, pool: ReqToTokenPool, spec: SpecInfo) -> Any:
        cfg = BackendConfig(variant=self.variant, spec=spec)
        return MultiStepDraftBackend(spec.num_steps, cfg, pool, self.device)

    def batch(self, ours: ForwardBatch) -> ForwardBatch:
        return ours

    def graph_state(self, backend: Any, max_bs: int, tokens_per_req: int) -> None:
        return None

    def prep(self, on: bool) -> Any:
        return nullcontext()

    def check_drift(self, exc: Exception) -> None:
        return None  # the model's exceptions are its outcomes

    def full_metadata(self, backend: Any) -> Any:
        return backend.forward_metadata


@dataclass
class UpstreamSide:
    world: UpstreamWorld
    name: str = "upstream"

    def backend(self, pool: ReqToTokenPool, spec: SpecInfo | None, prep: bool) -> Any:
        return self.world.backend(pool, spec)

    def multistep(self, pool: ReqToTokenPool, spec: SpecInfo) -> Any:
        return self.world.multistep(pool, spec)

    def batch(self, ours: ForwardBatch) -> Any:
        return self.world.batch(ours)

    def graph_state(self, backend: Any, max_bs: int, tokens_per_req: int) -> None:
        backend.init_cuda_graph_state(max_bs, max_bs * tokens_per_req)

    @contextmanager
    def prep(self, on: bool) -> Iterator[None]:
        with prep_in_graph(on):
            yield

    def check_drift(self, exc: Exception) -> None:
        """Raise the drift an exception shows (else it is upstream's outcome)."""
        drift = drift_of(exc)
        if drift is exc:
            raise exc
        if drift is not None:
            raise drift from exc

    def full_metadata(self, backend: Any) -> Any:
        return getattr(backend.forward_metadata, "core_attn_metadata", None)
