"""What each sync site costs: the time pass's waits (waits.csv, one row per synchronizing call
of a measured step) as µs per step spent waiting at each site, beside its calls per step.

Per cell and process: a site's waits summed over the measured steps, divided by the steps
(a step without a call at the site adds 0). Across processes: the mean and its t-interval
(N − 1 df, harness.results.replicas); one process gives the estimate without an interval.
"""

from __future__ import annotations

import pandas as pd

from harness.results.replicas import mean_interval
from harness.results.samples import CELL, step_times

SITE_KEYS = ["site", "kind"]
COST_COLUMNS = [
    *CELL, *SITE_KEYS, "processes", "calls_per_step", "us_per_step", "us_lo", "us_hi",
]  # fmt: skip


def site_costs(waits: pd.DataFrame, latency: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, site, kind), ranked by µs per step waiting within each cell."""
    steps = step_times(latency)
    steps = steps[steps["metric"] == "host"]
    if waits.empty or steps.empty:
        return pd.DataFrame(columns=COST_COLUMNS)
    n = steps.groupby([*CELL, "process"])["step"].nunique().rename("steps")
    per = waits.groupby([*CELL, "process", *SITE_KEYS]).agg(
        calls=("wait_ns", "size"), wait_ns=("wait_ns", "sum")
    )
    per = per.join(n, on=[*CELL, "process"], how="inner").reset_index()
    per["calls_per_step"] = per["calls"] / per["steps"]
    per["us_per_step"] = per["wait_ns"] / 1e3 / per["steps"]
    rows = []
    processes = steps.groupby(CELL)["process"].nunique()
    for key, g in per.groupby([*CELL, *SITE_KEYS], sort=False):
        cell = key[: len(CELL)]
        # a process that ran the cell but made no call at the site waited 0 there
        ran = int(processes.get(cell, len(g)))
        values = [*g["us_per_step"], *[0.0] * (ran - len(g))]
        ci, _p = mean_interval(values)
        calls = (g["calls_per_step"].sum()) / ran
        rows.append((*key, ran, calls, ci.estimate, ci.low, ci.high))
    out = pd.DataFrame(rows, columns=COST_COLUMNS)
    return out.sort_values([*CELL, "us_per_step"], ascending=[True] * len(CELL) + [False])
