"""A tiny serving scenario (one batch size, a short context, two or three steps) for tests that
run whole commands on it."""

from __future__ import annotations


def tiny_scenario(
    variants: tuple[str, ...] = ("after",), name: str = "tiny", count: int = 2
) -> str:
    """The scenario file's text: nonspec, batch 4, the given variants."""
    return f"""\
name: {name}
seed: 7
serving:
  model: flash
  serving_mode: nonspec
  batch_sizes: [4]
  context_len: 1024
  cuda_graph_max_bs: 8
  variants: [{", ".join(variants)}]
steps: {{warmup: 1, count: {count}, time: 2, time_emu: 2}}
"""
