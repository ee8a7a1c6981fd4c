"""Syncs on the metadata paths across sglang releases: each release's cells run once, held
against every variant, and what changed from the release before.

A release whose tree the loader does not understand keeps its drift line (the others still
run); the command exits 2 after printing what did run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.upstream.cells import CELLS, Outcome
from harness.upstream.execute import Execution, execute
from harness.upstream.loader import TreeDrift
from harness.variants import variant_names

SHORT = {"d2h_read": "D2H", "h2d_blocking": "H2D", "explicit": "SYNC"}


@dataclass
class ReleaseRun:
    version: str
    executions: list[Execution]  # one per variant, sharing upstream's outcomes; [] on drift
    drift: str | None = None

    @property
    def upstream(self) -> list[Outcome]:
        return [r.upstream for r in self.executions[0].results] if self.executions else []


def run_history(
    roots: Mapping[str, Path], device: torch.device, *, emulated: bool
) -> list[ReleaseRun]:
    """`roots`: release version -> its tree, oldest first."""
    variants = tuple(variant_names())
    runs = []
    for version, root in roots.items():
        try:
            executions = execute(
                root, variants, device, emulated=emulated, label=version, same_files=()
            )
        except TreeDrift as drift:
            runs.append(ReleaseRun(version, [], str(drift)))
            continue
        runs.append(ReleaseRun(version, executions))
    return runs


def _short(outcome: Outcome) -> str:
    """A cell's outcome in a few characters: the exception, or the syncs by kind."""
    if outcome.exception:
        return outcome.exception
    if not outcome.syncs:
        return "-"
    kinds = outcome.kinds
    return " ".join(
        f"{kinds.count(k)}×{SHORT.get(k, k)}" if kinds.count(k) > 1 else SHORT.get(k, k)
        for k in dict.fromkeys(kinds)
    )


def _shape(outcome: Outcome) -> tuple:
    """What a release change is judged by: the exception, or the syncs' kinds and functions
    (line numbers move between releases without the code changing)."""
    return outcome.exception, tuple(sorted((k, fn) for k, _, fn in outcome.syncs))


def _sites(outcome: Outcome) -> str:
    if outcome.exception:
        return outcome.exception
    if not outcome.syncs:
        return "none"
    counted = Counter((k, loc.split("sglang/srt/", 1)[-1], fn) for k, loc, fn in outcome.syncs)
    return ", ".join(
        f"{f'{n}× ' if n > 1 else ''}{k} {loc} `{fn}`" for (k, loc, fn), n in counted.items()
    )


def render_history(runs: list[ReleaseRun]) -> str:
    """Markdown: the cells' syncs per release, each release's agreement with the variants,
    and the cells each release changed (with their sites)."""
    versions = [r.version for r in runs]
    variants = variant_names()
    lines = [
        "### Upstream's syncs per cell and release",
        "",
        f"{'/'.join(f'{v} {k}' for k, v in SHORT.items())}; `-` none; an exception's name "
        "where the cell raised.",
        "",
        "| cell | " + " | ".join(versions) + " |",
        "| --- |" + " --- |" * len(versions),
    ]
    for i, cell in enumerate(CELLS):
        row = [_short(r.upstream[i]) if not r.drift else "drift" for r in runs]
        lines.append(f"| {cell.name} | " + " | ".join(row) + " |")
    lines += [
        "",
        "### Agreement with the model (cells whose syncs or exception match each variant's)",
        "",
        "| release | " + " | ".join(variants) + " |",
        "| --- |" + " --- |" * len(variants),
    ]
    for r in runs:
        cells = [f"{ex.agreeing} of {len(ex.results)}" for ex in r.executions]
        lines.append(f"| {r.version} | " + " | ".join(cells or ["-"] * len(variants)) + " |")
    lines += ["", "### What each release changed", ""]
    before: ReleaseRun | None = None
    for r in runs:
        if r.drift:
            lines.append(f"- **{r.version}**: not run: {r.drift}")
            continue
        if before is None:
            lines.append(f"- **{r.version}**: the first release run")
        else:
            changed = [
                f"  - {cell.name}: {_sites(old)} → {_sites(new)}"
                for cell, old, new in zip(CELLS, before.upstream, r.upstream)
                if _shape(old) != _shape(new)
            ]
            lines.append(f"- **{r.version}**: {len(changed) or 'no'} cells changed")
            lines += changed
        before = r
    return "\n".join(lines)
