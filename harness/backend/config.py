"""Model shapes and the backend's configuration."""

from __future__ import annotations

from dataclasses import dataclass

import kernels as kernel_lib
from harness.batch.info import SpecInfo


@dataclass(frozen=True)
class ModelShape:
    """What the metadata depends on beyond the batch: the indexer's top-k.

    Metadata is built once per step and shared by all layers, and both models have layers at
    compress ratios 4 and 128 (Flash: 43 layers, 2 at ratio 0, 21 at 4, 20 at 128; Pro: 61
    layers, 30 at 4, 31 at 128), so the layer list does not change it."""

    name: str
    index_topk: int


MODEL_SHAPES: dict[str, ModelShape] = {
    "flash": ModelShape("flash", index_topk=kernel_lib.INDEX_TOPK_FLASH),
    "pro": ModelShape("pro", index_topk=kernel_lib.INDEX_TOPK_PRO),
}


def get_model_shape(name: str | ModelShape) -> ModelShape:
    if isinstance(name, ModelShape):
        return name
    try:
        return MODEL_SHAPES[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODEL_SHAPES)}") from None


@dataclass(frozen=True)
class BackendConfig:
    """Configuration of one backend instance (the parts of sglang's server args it reads).

    spec: the speculative setup when one is configured (EAGLE / spec-v2), else None. It gives
      the verify draft-token count and the draft steps; `after` reads "is spec configured".
    prep_in_graph: upstream's PREP_IN_CUDA_GRAPH (default on): decode and verify build raw
      metadata out of graph and upgrade it in graph.
    kernels: which `kernels.get_ops(name)` implementation runs the per-token work.
    topk_cluster_threshold: c4 length above which the indexer schedule lists a token
      (upstream value 4096; tests lower it to exercise the schedule on short contexts).
    """

    model: str | ModelShape = "flash"
    variant: str = "after"
    prep_in_graph: bool = True
    spec: SpecInfo | None = None
    kernels: str = "torch"
    topk_cluster_threshold: int = kernel_lib.TOPK_CLUSTER_THRESHOLD

    @property
    def shape(self) -> ModelShape:
        return get_model_shape(self.model)

    @property
    def spec_configured(self) -> bool:
        return self.spec is not None
