"""A/A false positives, measured rather than assumed: every A/A pair of a run (a cell and its
independently built twin) judged as the summary judges a Δ — the paired t-interval of the
difference of per-process medians excludes 0 — over disjoint groups of processes, so that one
run gives many independent verdicts. Each (pair, group) is one verdict; the rate of flagged
ones has a Clopper–Pearson interval.

Groups of 2, 3 and 5 processes (as many disjoint ones as the run holds, in process order; a
remainder is left out), and all the run's processes as one group.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results.deltas import CellRates, cell_rates
from harness.results.replicas import beta_quantile, paired_process_difference
from harness.results.samples import headline_metric, step_times
from harness.results.stats import LEVEL
from harness.results.tables import AA_ARM, COLUMNS

GROUP_SIZES = (2, 3, 5)
_ARM = 6  # position in a cell tuple (CELL_KEYS)


@dataclass(frozen=True)
class Verdicts:
    group: int  # processes per group
    verdicts: int
    flagged: int

    @property
    def rate(self) -> float:
        return self.flagged / self.verdicts

    def interval(self) -> tuple[float, float]:
        """Clopper–Pearson (exact binomial) LEVEL interval of the rate."""
        k, n, a = self.flagged, self.verdicts, (1 - LEVEL) / 2
        lo = beta_quantile(a, k, n - k + 1) if k else 0.0
        hi = beta_quantile(1 - a, k + 1, n - k) if k < n else 1.0
        return lo, hi


def aa_pairs(rates: dict[tuple, CellRates]) -> list[tuple[tuple, tuple]]:
    """(cell, its A/A twin) for every timed twin of a run."""
    pairs = []
    for twin in rates:
        cell = (*twin[:_ARM], "")
        if twin[_ARM] == AA_ARM and cell in rates and not rates[twin].times.empty:
            pairs.append((cell, twin))
    return pairs


def verdicts(rates: dict[tuple, CellRates], group: int) -> Verdicts:
    """Every A/A pair judged over disjoint groups of `group` processes."""
    n = flagged = 0
    for cell, twin in aa_pairs(rates):
        a, b = rates[cell].medians, rates[twin].medians
        procs = sorted(set(a.index) & set(b.index))
        for i in range(0, len(procs) - group + 1, group):
            part = procs[i : i + group]
            ci, _p = paired_process_difference(a[part], b[part])
            n += 1
            flagged += ci.excludes_zero
    return Verdicts(group, n, flagged)


def false_positives(latency: pd.DataFrame) -> list[Verdicts]:
    """The run's A/A verdicts at each group size it holds a group of, then over all its
    processes; empty without A/A arms or with fewer than two processes."""
    steps = step_times(latency)
    if steps.empty:
        return []
    rates = cell_rates(pd.DataFrame(columns=COLUMNS["counts"]), steps, headline_metric(steps))
    everyone = int(steps["process"].nunique())
    sizes = [g for g in GROUP_SIZES if g < everyone] + ([everyone] if everyone >= 2 else [])
    return [v for v in (verdicts(rates, g) for g in sizes) if v.verdicts]


def false_positive_section(latency: pd.DataFrame) -> list[str]:
    found = false_positives(latency)
    if not found:
        return []
    everyone = max(v.group for v in found)
    parts = []
    for v in found:
        lo, hi = v.interval()
        size = f"all {v.group} processes" if v.group == everyone else f"groups of {v.group}"
        parts.append(
            f"{size}: {v.flagged} of {v.verdicts} flagged, {v.rate:.1%} [{lo:.1%}, {hi:.1%}]"
        )
    head = (
        "\nA/A false positives (each A/A pair judged as a Δ is, over disjoint groups of "
        "processes; 95% Clopper–Pearson interval of the rate):"
    )
    return [head, *(f"  {p}" for p in parts)]
