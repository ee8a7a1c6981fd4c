"""The time pass's samples of whole steps: one row per (cell, step, metric), and per-cell
dispersion. Raw samples in, statistics out; no sample is dropped as an outlier."""

from __future__ import annotations

import pandas as pd

from harness.results.stats import median_interval
from harness.results.tables import CELL_KEYS

CELL = list(CELL_KEYS)
STEP_REGION = "iteration"  # the time pass's whole scheduler iteration (host, device, e2e)
UNMEASURED_TIME = ("warmup", "capture", "setup")  # set-up and warm-up samples
METRICS = ("host", "device", "e2e")


def step_times(latency: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, step, metric) of the measured steps: value_us (and round)."""
    lat = latency[~latency["path"].isin(UNMEASURED_TIME) & (latency["step"] >= 0)]
    whole = lat[lat["region"].astype(str) == STEP_REGION]
    cols = [*CELL, "step", "metric", "value_us"] + (["round"] if "round" in whole else [])
    return whole[cols].reset_index(drop=True)


def headline_metric(steps: pd.DataFrame) -> str:
    """e2e when measured (a GPU run: it holds the pipeline bubble), else host time."""
    have = set(steps["metric"].astype(str))
    return next((m for m in ("e2e", "host") if m in have), "host")


def cell_series(steps: pd.DataFrame, cell: tuple, metric: str) -> pd.Series:
    """A cell's samples of one metric, indexed by step (for paired statistics)."""
    mask = (steps["metric"] == metric) & (steps[CELL] == pd.Series(cell, index=CELL)).all(axis=1)
    return steps.loc[mask].set_index("step")["value_us"]


def dispersion(steps: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, metric): n, rounds, p50 with its 95% interval, p90, p99 and the IQR, µs."""
    rows = []
    for (*cell, metric), g in steps.groupby([*CELL, "metric"], sort=True):
        v = g["value_us"]
        ci = median_interval(v.reset_index(drop=True))
        q = v.quantile([0.25, 0.9, 0.99, 0.75])
        rounds = g["round"].nunique() if "round" in g else 0
        rows.append(
            (
                *cell,
                metric,
                len(v),
                rounds,
                ci.estimate,
                ci.low,
                ci.high,
                q[0.9],
                q[0.99],
                q[0.75] - q[0.25],
            )
        )
    cols = [*CELL, "metric", "n", "rounds", "p50", "p50_lo", "p50_hi", "p90", "p99", "iqr"]
    return pd.DataFrame(rows, columns=cols)
