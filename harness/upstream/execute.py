"""Runs every cell on upstream's tree and on one model variant, and compares them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from harness.upstream.cells import CELLS, Cell, Outcome, cell_inputs
from harness.upstream.paths import run
from harness.upstream.sides import ModelSide, UpstreamSide
from harness.upstream.tree import loaded


@dataclass
class CellResult:
    cell: Cell
    upstream: Outcome
    model: Outcome

    @property
    def agree(self) -> bool:
        u, m = self.upstream, self.model
        if u.exception or m.exception:
            return u.exception == m.exception
        return u.kinds == m.kinds

    @property
    def values_agree(self) -> bool | None:
        """Whether the torch-computed metadata is equal (None: a side has none to compare)."""
        shared = set(self.upstream.values) & set(self.model.values)
        if not shared:
            return None
        return all(torch.equal(self.upstream.values[k], self.model.values[k]) for k in shared)


@dataclass
class Execution:
    label: str  # the release's version, or the checkout's path
    variant: str
    # files (under sglang/srt/) byte for byte the variant's commit's, whose sites the table's
    # line numbers name; None: every file (the tree is a checkout of that commit)
    same_files: tuple[str, ...] | None
    results: list[CellResult]
    stand_in_calls: Counter = field(default_factory=Counter)
    run_for_real: frozenset[str] = frozenset()  # Triton kernels that ran (CUDA), by label

    @property
    def agreeing(self) -> int:
        return sum(r.agree for r in self.results)

    def lines_apply(self, location: str) -> bool:
        return self.same_files is None or any(location.endswith(f) for f in self.same_files)


def execute(
    tree: Path,
    variants: tuple[str, ...],
    device: torch.device,
    *,
    emulated: bool,
    label: str,
    same_files: tuple[str, ...] | None,
) -> list[Execution]:
    """Every cell on the tree under `tree` (the folder holding ``sglang/``), and on each of
    `variants` on the same inputs: one Execution per variant."""
    with loaded(tree, device, emulated=emulated) as (world, installed):
        upstream = UpstreamSide(world)
        models = [ModelSide(v, device) for v in variants]
        results: list[list[CellResult]] = [[] for _ in variants]
        for cell in CELLS:
            inputs = cell_inputs(cell, device)
            theirs = run(upstream, inputs)
            for out, model in zip(results, models):
                out.append(CellResult(cell, theirs, run(model, inputs)))
        installed.check_reached()
    return [Execution(label, v, same_files, r, installed.calls) for v, r in zip(variants, results)]
