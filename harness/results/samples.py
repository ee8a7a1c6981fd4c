"""The time pass's samples of whole steps: one row per (cell, step, metric), and per-cell
dispersion. Raw samples in, statistics out; no sample is dropped as an outlier."""

from __future__ import annotations

import pandas as pd

from harness.results.replicas import MIN_PROCESSES, mean_interval
from harness.results.stats import Interval, median_interval
from harness.results.tables import CELL_KEYS

CELL = list(CELL_KEYS)
STEP_REGION = "iteration"  # the time pass's whole scheduler iteration (host, device, e2e)
UNMEASURED_TIME = ("warmup", "capture", "setup")  # set-up and warm-up samples
METRICS = ("host", "device", "e2e")


def step_times(latency: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, step, metric) of the measured steps: value_us (and round)."""
    lat = latency[~latency["path"].isin(UNMEASURED_TIME) & (latency["step"] >= 0)]
    whole = lat[lat["region"].astype(str) == STEP_REGION]
    cols = [*CELL, "process", "step", "metric", "value_us"]
    cols += ["round"] if "round" in whole else []
    return whole[cols].reset_index(drop=True)


def headline_metric(steps: pd.DataFrame) -> str:
    """e2e when measured (a GPU run: it holds the pipeline bubble), else host time."""
    have = set(steps["metric"].astype(str))
    return next((m for m in ("e2e", "host") if m in have), "host")


def cell_series(steps: pd.DataFrame, cell: tuple, metric: str) -> pd.Series:
    """A cell's samples of one metric, indexed by (process, step) (for paired statistics: step
    k of a process is the same work in every cell)."""
    mask = (steps["metric"] == metric) & (steps[CELL] == pd.Series(cell, index=CELL)).all(axis=1)
    return steps.loc[mask].set_index(["process", "step"])["value_us"]


def processes(steps: pd.DataFrame) -> int:
    """How many worker processes the samples came from (`--repeats N`)."""
    return int(steps["process"].nunique()) if len(steps) else 0


def level_interval(series: pd.Series) -> Interval:
    """A cell's p50 with its 95% interval at the level where the variance lives: over the
    per-process medians (t, N − 1 df) when several processes ran it, else over its steps."""
    medians = series.groupby(level="process").median()
    if len(medians) >= MIN_PROCESSES:
        return mean_interval(medians.to_numpy())[0]
    return median_interval(series.reset_index(drop=True))


def dispersion(steps: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, metric): n, processes, rounds, p50 with its 95% interval (between processes
    with several), p90, p99 and the IQR, µs."""
    rows = []
    for (*cell, metric), g in steps.groupby([*CELL, "metric"], sort=True):
        v = g["value_us"]
        ci = level_interval(g.set_index(["process", "step"])["value_us"])
        q = v.quantile([0.25, 0.9, 0.99, 0.75])
        rounds = g["round"].nunique() if "round" in g else 0
        rows.append(
            (
                *cell,
                metric,
                len(v),
                g["process"].nunique(),
                rounds,
                ci.estimate,
                ci.low,
                ci.high,
                q[0.9],
                q[0.99],
                q[0.75] - q[0.25],
            )
        )
    cols = [
        *CELL,
        "metric",
        "n",
        "processes",
        "rounds",
        "p50",
        "p50_lo",
        "p50_hi",
        "p90",
        "p99",
        "iqr",
    ]
    return pd.DataFrame(rows, columns=cols)
