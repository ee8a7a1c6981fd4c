"""µs per sync from the experiment's raw samples, and the check that the count pass saw exactly
k syncs per step of the injected kind (pure pandas: the summary and the figure use it, on a
run's rows of the sync-cost world, whose `case` column holds each cell's case).

Per forward duration, batch size and kind, from the median step time at each k (the k = 0
cell is shared by every kind), each with a 95% bootstrap interval paired by step
(harness.results.stats):
- `per_sync`: the least-squares slope of the median against k over every k run (µs per sync);
- `first`: median at k = 1 minus median at k = 0, what the first sync of a step costs (it waits
  for the queued forward: the pipeline bubble);
- `further`: the slope over k ≥ 1, what each sync after the first costs (the queue is idle by
  then: the sync's own latency).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results.rates import measured, steps_per_kind
from harness.results.samples import CELL, cell_series
from harness.results.stats import Interval, median_difference, median_interval, median_slope
from harness.synccost.cases import INJECTIONS, NO_SYNC, SyncCostCase, parse_case


@dataclass(frozen=True)
class SyncCost:
    forward_us: float
    kind: str
    batch_size: int
    ks: tuple[int, ...]
    medians: dict[int, Interval]  # k -> median step time
    per_sync: Interval
    first: Interval | None  # None without both k = 0 and k = 1
    further: Interval | None  # None with fewer than two k >= 1


def _cells(steps: pd.DataFrame) -> dict[tuple, SyncCostCase]:
    cells = steps[CELL].drop_duplicates()
    return {tuple(c): parse_case(c[1]) for c in cells.itertuples(index=False)}


def sync_costs(steps: pd.DataFrame, metric: str) -> list[SyncCost]:
    """One SyncCost per (forward duration, batch size, kind), forward duration outermost."""
    cells = _cells(steps)
    series = {c: cell_series(steps, c, metric) for c in cells}
    out = []
    for fwd, bs in sorted({(case.forward_us, c[4]) for c, case in cells.items()}):
        here = {c: case for c, case in cells.items() if case.forward_us == fwd and c[4] == bs}
        zero = [series[c] for c, case in here.items() if case.k == 0]
        for kind in [k for k in INJECTIONS if any(case.kind == k for case in here.values())]:
            by_k = {case.k: series[c] for c, case in here.items() if case.kind == kind}
            if zero:
                by_k[0] = zero[0]
            out.append(_cost(fwd, kind, bs, dict(sorted(by_k.items()))))
    return out


def _cost(fwd: float, kind: str, bs: int, by_k: dict[int, pd.Series]) -> SyncCost:
    ks = tuple(by_k)
    nonzero = {k: v for k, v in by_k.items() if k > 0}
    first = median_difference(by_k[0], by_k[1]) if {0, 1} <= set(ks) else None
    return SyncCost(
        forward_us=fwd,
        kind=kind,
        batch_size=bs,
        ks=ks,
        medians={k: median_interval(v) for k, v in by_k.items()},
        per_sync=median_slope(by_k),
        first=first,
        further=median_slope(nonzero) if len(nonzero) >= 2 else None,
    )


def count_problems(counts: pd.DataFrame, syncs: pd.DataFrame) -> list[str]:
    """Cells whose measured steps did not each make exactly k syncs of the injected kind."""
    m = measured(counts)
    steps = steps_per_kind(counts).groupby(CELL)["steps"].sum()
    per_step = m.groupby([*CELL, "step"])["syncs"].sum()
    kinds = measured(syncs, counts).groupby(CELL)["kind"].agg(lambda k: sorted(set(k)))
    problems = []
    for cell, n_steps in steps.items():
        case = parse_case(cell[1])
        made = per_step.loc[cell]
        want_kind = [] if case.kind == NO_SYNC else [INJECTIONS[case.kind]]
        got_kind = kinds.get(cell, [])
        if (made != case.k).any() or got_kind != want_kind:
            problems.append(
                f"{case.label} bs={cell[4]}: syncs per step {sorted(set(made))} of kind(s) "
                f"{got_kind or 'none'} over {n_steps} steps; expected {case.k} of "
                f"{want_kind or 'none'}"
            )
    return problems
