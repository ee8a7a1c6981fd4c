"""Runs every cell on upstream's tree and on one model variant, and compares them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from harness.upstream.cells import CELLS, Cell, Outcome, cell_inputs, run
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
    exact_lines: bool  # the tree is the variant's commit: the table's line numbers apply
    results: list[CellResult]
    stand_in_calls: Counter = field(default_factory=Counter)

    @property
    def agreeing(self) -> int:
        return sum(r.agree for r in self.results)


def execute(
    tree: Path,
    variant: str,
    device: torch.device,
    *,
    emulated: bool,
    label: str,
    exact_lines: bool,
) -> Execution:
    """Every cell on the tree under `tree` (the folder holding ``sglang/``) and on `variant`."""
    with loaded(tree, device, emulated=emulated) as (world, installed):
        upstream, model = UpstreamSide(world), ModelSide(variant, device)
        results = []
        for cell in CELLS:
            inputs = cell_inputs(cell, device)
            results.append(CellResult(cell, run(upstream, inputs), run(model, inputs)))
        installed.check_reached()
    return Execution(label, variant, exact_lines, results, installed.calls)
