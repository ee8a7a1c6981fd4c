"""Bootstrap intervals for the time pass's raw samples (numpy only; statistics after the run).

One method for every interval the harness prints or plots:
- the statistic is built from medians (a median, a difference of two medians, the slope of
  medians against a dose such as syncs per step);
- percentile bootstrap with RESAMPLES resamples from a fixed SEED, two-sided LEVEL (95%);
- samples are paired by step: every cell of a scenario runs the same seeded step sequence
  (same batches, same prefill steps), so a resample draws step indices with replacement and
  takes those steps from every cell compared. Steps a cell lacks (it failed) are left out of
  all of them;
- a difference is measurable when its interval excludes 0.
These intervals hold the spread between the steps of one process only; with several worker
processes (`--repeats N`) the harness takes its intervals between processes instead
(harness.results.replicas).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
_CHUNK_VALUES = 2_000_000  # resampled values held at once (memory bound of one chunk)


@dataclass(frozen=True)
class Interval:
    """An estimate and its bootstrap interval (NaN bounds with fewer than 2 paired steps)."""

    estimate: float
    low: float
    high: float
    n: int  # paired steps the interval was resampled from

    @property
    def excludes_zero(self) -> bool:
        return bool(self.low > 0 or self.high < 0)


def paired(series: Mapping[object, pd.Series]) -> pd.DataFrame:
    """Columns of per-step values (each series indexed by step), on the steps all share."""
    return pd.concat(dict(series), axis=1, join="inner").dropna()


def bootstrap_medians(
    table: pd.DataFrame, statistic: Callable[[np.ndarray], np.ndarray]
) -> Interval:
    """`statistic` maps medians (resamples × columns) to one value per resample; it is applied
    to the columns' medians for the estimate and to every resample's medians for the interval."""
    values = table.to_numpy(dtype=float)
    n = len(values)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    estimate = float(statistic(np.median(values, axis=0)[None, :])[0])
    if n < 2:
        return Interval(estimate, float("nan"), float("nan"), n)
    rng = np.random.default_rng(SEED)
    chunk = max(1, _CHUNK_VALUES // values.size)
    out = []
    for start in range(0, RESAMPLES, chunk):
        idx = rng.integers(0, n, size=(min(chunk, RESAMPLES - start), n))
        out.append(statistic(resampled_medians(values, idx)))
    stats = np.concatenate(out)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), n)


def resampled_medians(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """`np.median(values[idx], axis=1)`, bit for bit, without partitioning every resample.

    A median is one order statistic, or the mean of two; the k-th smallest of a resample is the
    value whose rank is the k-th smallest of the resample's ranks, read off the running count of
    each rank (linear in the resample, where np.median partitions every resample's floats). NaN
    as in np.median: a resample that draws one has a NaN median."""
    r, n = idx.shape
    lo, hi = (n - 1) // 2, n // 2
    offsets = (np.arange(r) * n)[:, None]
    out = np.empty((r, values.shape[1]))
    for j, column in enumerate(values.T):
        order = np.argsort(column, kind="stable")  # NaN sort last
        rank = np.empty(n, dtype=np.intp)
        rank[order] = np.arange(n)
        counts = np.bincount((rank[idx] + offsets).ravel(), minlength=r * n).reshape(r, n)
        running = np.cumsum(counts, axis=1)
        ordered = column[order]
        median = ordered[np.argmax(running > lo, axis=1)]
        if hi != lo:
            median = (median + ordered[np.argmax(running > hi, axis=1)]) / 2
        clean = n - int(np.isnan(column).sum())
        median[counts[:, clean:].any(axis=1)] = np.nan
        out[:, j] = median
    return out


def median_interval(values: pd.Series) -> Interval:
    """The median of one cell's samples, with its interval."""
    return bootstrap_medians(values.dropna().to_frame(), lambda m: m[:, 0])


def median_difference(a: pd.Series, b: pd.Series) -> Interval:
    """median(b) − median(a), paired by step (the series' index)."""
    return bootstrap_medians(paired({"a": a, "b": b}), lambda m: m[:, 1] - m[:, 0])


def median_slope(by_dose: Mapping[float, pd.Series]) -> Interval:
    """Least-squares slope of the median against the dose (the mapping's keys), paired by
    step: e.g. µs of step time per injected sync."""
    table = paired(by_dose)
    x = np.asarray(list(table.columns), dtype=float)
    if len(x) < 2:
        return Interval(float("nan"), float("nan"), float("nan"), len(table))
    xc = x - x.mean()
    return bootstrap_medians(table, lambda m: (m @ xc) / float(xc @ xc))
