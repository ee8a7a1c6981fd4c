"""Model shapes and the backend's configuration."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import kernels as kernel_lib
from harness.serving.batch import SpecInfo


@dataclass(frozen=True)
class ModelShape:
    """What the metadata depends on: the compress ratio of every layer and the indexer's top-k.

    Metadata is built once per step and shared by all layers, so the layer list only decides
    which ratios are present (and is reported with results)."""

    name: str
    layer_ratios: tuple[int, ...]
    index_topk: int
    head_dim: int = 512

    @property
    def num_layers(self) -> int:
        return len(self.layer_ratios)

    @property
    def present_ratios(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.layer_ratios)))

    @property
    def has_c4(self) -> bool:
        return 4 in self.layer_ratios

    @property
    def has_c128(self) -> bool:
        return 128 in self.layer_ratios

    def layers_by_ratio(self) -> dict[int, int]:
        return dict(sorted(Counter(self.layer_ratios).items()))


def _interleave(first: int, n_first: int, second: int, n_second: int) -> tuple[int, ...]:
    out: list[int] = []
    for i in range(max(n_first, n_second)):
        if i < n_first:
            out.append(first)
        if i < n_second:
            out.append(second)
    return tuple(out)


# Flash: 43 layers (2 dense-SWA at ratio 0, then ratio 4 and 128 alternating: 21 + 20).
# Pro: 61 layers (31 at ratio 128, 30 at ratio 4).
MODEL_SHAPES: dict[str, ModelShape] = {
    "flash": ModelShape(
        "flash", (0, 0, *_interleave(4, 21, 128, 20)), index_topk=kernel_lib.INDEX_TOPK_FLASH
    ),
    "pro": ModelShape("pro", _interleave(128, 31, 4, 30), index_topk=kernel_lib.INDEX_TOPK_PRO),
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
