"""The two sides a cell runs on: the model's code and upstream's, behind one interface."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from harness.backend import BackendConfig, DeepseekV4AttnBackend, MultiStepDraftBackend
from harness.batch.info import ForwardBatch, SpecInfo
from harness.batch.pool import ReqToTokenPool
from harness.serving.mirror import LengthRelay
from harness.serving.section import ServingConfig, SpecConfig
from harness.serving.world import World, WorldConfig
from harness.upstream.cells import SEED, SPEC, CellInputs
from harness.upstream.loader import drift_of
from harness.upstream.world import UpstreamWorld, prep_in_graph

# the metadata tensors torch computes on both sides, compared value for value
VALUE_FIELDS = ("page_table", "seq_lens_casual", "positions_casual", "swa_page_indices")
Measured = tuple[Callable[[], None], Callable[[], dict[str, Any]]]


def _fields(md: Any) -> dict[str, Any]:
    return {name: getattr(md, name, None) for name in VALUE_FIELDS}


def _relay_batch(x: CellInputs) -> tuple[ForwardBatch, list[int]]:
    b = x.batch(False)
    return b, x.rows[: b.batch_size]


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

    def metadata_values(self, backend: Any) -> dict[str, Any]:
        return _fields(backend.forward_metadata)

    def sparse_prefill(self, backend: Any, batch: ForwardBatch, ratios: tuple[int, ...]) -> int:
        """The model's prefill forward: one workspace sizing whatever its layers' ratios."""
        return backend.sparse_prefill_workspace_len_d2h(batch)

    def relay(self, x: CellInputs, *, publish: bool) -> Measured:
        """The serving world's spec-v2 relay (its flag, relay and decode mirror) on the cell's
        rows; without a publish, a relay that has seen none."""
        serving = ServingConfig(
            serving_mode="specv2",
            context_len=x.pool.cfg.context_len,
            prep_in_graph=x.cell.prep,
            spec=SpecConfig(steps=SPEC.num_steps, draft_tokens=SPEC.draft_token_num),
            variants=[self.variant],
        )
        world = World(
            WorldConfig(serving, self.variant, "auto", x.pool.cfg.max_reqs, SEED), x.device
        )
        stack = world.stack
        if not publish:
            stack.relay = LengthRelay(world.pool.cfg.max_reqs, x.device)
        b, rows = _relay_batch(x)
        seen: dict[str, Any] = {}

        def call() -> None:
            if publish:
                stack.relay.publish(b.req_pool_indices, b.seq_lens)
            seq_lens = stack.relay.resolve_seq_lens(b.req_pool_indices)
            mirror = world.mode.decode_mirror(stack, rows, list(x.case.seq_lens), seq_lens)
            if publish:  # before a publish the device buffer holds nothing to compare
                seen.update(seq_lens=seq_lens, seq_lens_cpu=mirror.seq_lens_cpu)

        return call, lambda: seen


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

    def metadata_values(self, backend: Any) -> dict[str, Any]:
        return _fields(getattr(backend.forward_metadata, "core_attn_metadata", None))

    def sparse_prefill(self, backend: Any, batch: Any, ratios: tuple[int, ...]) -> int:
        return self.world.sparse_prefill(backend, batch, ratios)

    def relay(self, x: CellInputs, *, publish: bool) -> Measured:
        """Upstream's FutureMap, its flag decided over the target, draft and draft-extend
        backends; the worker's publish, then the scheduler's resolve."""
        pool = x.pool
        backends = (
            self.backend(pool, SPEC, x.cell.prep),
            self.multistep(pool, SPEC),
            self.backend(pool, SPEC, x.cell.prep),
        )
        future_map = self.world.future_map(pool, SPEC, backends)
        b, rows = _relay_batch(x)
        batch = self.world.schedule_batch(b, rows)
        seen: dict[str, Any] = {}

        def call() -> None:
            if publish:
                future_map.publish(b.req_pool_indices, b.seq_lens)
            future_map.resolve_seq_lens_cpu(batch)
            if publish:
                seen.update(seq_lens=batch.seq_lens, seq_lens_cpu=batch.seq_lens_cpu)

        return call, lambda: seen
