"""How sharp a run's answer is so far: the half-width of named Δs (`--repeats auto` adds worker
processes until they reach a target).

A Δ is named `VARIANT` or `VARIANT:BATCH` (e.g. `dropped:4`): that variant's cells (not an A/A
arm) against the reference cell of the same scenario, case, batch size and rank, paired by
process as the summary pairs them (harness.results.deltas); across two trees (`--against`),
the same cell of B against A, paired by interleaved pair (harness.results.against).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from harness.errors import InputError
from harness.results.deltas import CellRates, cell_name, cell_rates, paired_delta
from harness.results.replicas import paired_process_difference
from harness.results.samples import headline_metric, step_times
from harness.results.stats import Interval
from harness.results.tables import COLUMNS

_VARIANT, _MIRROR, _BATCH, _ARM = 2, 3, 4, 6  # positions in a cell tuple (CELL_KEYS)


@dataclass(frozen=True)
class DeltaName:
    variant: str
    batch_size: int | None = None  # None: every batch size

    @classmethod
    def parse(cls, text: str) -> DeltaName:
        variant, _, bs = text.partition(":")
        if not variant or (bs and not bs.isdigit()):
            raise InputError(
                f"{text!r} names no Δ (VARIANT or VARIANT:BATCH_SIZE, e.g. dropped:4)",
                key="--delta",
            )
        return cls(variant, int(bs) if bs else None)

    def __str__(self) -> str:
        return self.variant if self.batch_size is None else f"{self.variant}:{self.batch_size}"

    def matches(self, cell: tuple) -> bool:
        return cell[_VARIANT] == self.variant and (
            self.batch_size is None or cell[_BATCH] == self.batch_size
        )


def half_width(ci: Interval) -> float:
    """Half the interval's width (NaN without an interval)."""
    return (ci.high - ci.low) / 2


def _rates(latency: pd.DataFrame) -> dict[tuple, CellRates]:
    steps = step_times(latency)
    return cell_rates(pd.DataFrame(columns=COLUMNS["counts"]), steps, headline_metric(steps))


def _named(rates: dict, names: Sequence[DeltaName], pick: Callable[[tuple], bool]) -> list:
    """Timed cells a name covers (every non-reference cell where `names` is empty)."""
    cells = [c for c in rates if not rates[c].times.empty and c[_ARM] == "" and pick(c)]
    return [c for c in cells if not names or any(n.matches(c) for n in names)]


def within_run(
    latency: pd.DataFrame, reference: str, names: Sequence[DeltaName]
) -> dict[str, Interval]:
    """Each named Δ of a run against the reference cell at its place (its first mirror)."""
    rates = _rates(latency)
    refs: dict[tuple, tuple] = {}
    for c in rates:
        if c[_VARIANT] == reference and c[_ARM] == "" and not rates[c].times.empty:
            refs.setdefault((*c[:_VARIANT], *c[_BATCH:_ARM]), c)
    out = {}
    mirrors = {c[_MIRROR] for c in rates}
    for c in _named(rates, names, lambda c: c[_VARIANT] != reference):
        ref = refs.get((*c[:_VARIANT], *c[_BATCH:_ARM]))
        if ref is not None:
            out[cell_name(c, mirrors)] = paired_delta(rates[ref], rates[c])
    return out


def missing_names(latency: pd.DataFrame, names: Sequence[DeltaName]) -> list[str]:
    """Names that match no timed cell of the run (a typo must not pass as 'reached')."""
    rates = _rates(latency)
    return [str(n) for n in names if not any(n.matches(c) for c in rates)]


def across_trees(
    latency_a: pd.DataFrame, latency_b: pd.DataFrame, names: Sequence[DeltaName]
) -> dict[str, Interval]:
    """Each named cell (every cell where `names` is empty) of B against the same cell of A,
    paired by process (an against run's pair)."""
    ra, rb = _rates(latency_a), _rates(latency_b)
    mirrors = {c[_MIRROR] for c in ra}
    out = {}
    for c in _named(ra, names, lambda c: c in rb and not rb[c].times.empty):
        out[cell_name(c, mirrors)] = paired_process_difference(ra[c].medians, rb[c].medians)[0]
    return out
