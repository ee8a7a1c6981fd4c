"""Intervals at the level where the variance lives: between worker processes (`--repeats N`).

A fresh process has fresh allocations, fresh worlds and fresh captured graphs; its median step
time moves more from one process to the next than the steps move inside one. So the unit of
replication is the process: each process's samples are reduced to its median, and the interval
is a Student t-interval over those N medians with N − 1 degrees of freedom.

Why t and not a hierarchical bootstrap (resample processes, then steps): with the few processes
a run can afford (3 to 10), a bootstrap over processes only ever sees the N values it has, so
its percentile interval is too narrow (in tests/results/test_results_replicas.py's seeded trials a 95%
interval over 5 processes covers the truth 85% of the time, the t-interval 96%); the t quantile
pays for the spread not yet seen. Process medians are near normal (a median of hundreds of steps), which is
what the t-interval assumes.

- within a run, cells are paired by process (each process ran every cell, interleaved): the
  interval is over the per-process differences of medians;
- across runs (`compare`), processes do not pair: Welch's interval over both runs' medians
  (Welch–Satterthwaite degrees of freedom); it holds the drift between the runs;
- several cells compared at once: Holm's step-down correction of their p-values.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.results.stats import LEVEL, Interval

MIN_PROCESSES = 2  # fewer: no spread between processes, no interval


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300

    def clamp(v: float) -> float:
        return v if abs(v) > tiny else tiny

    c, d = 1.0, 1.0 / clamp(1.0 - (a + b) * x / (a + 1.0))
    h = d
    for m in range(1, 300):
        even = m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))
        for coef in (even, odd):
            d = 1.0 / clamp(1.0 + coef * d)
            c = clamp(1.0 + coef / c)
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
    front = math.exp(ln + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def beta_quantile(p: float, a: float, b: float) -> float:
    """The p quantile of the Beta(a, b) distribution (bisection on I_x(a, b))."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _betai(a, b, mid) < p else (lo, mid)
    return (lo + hi) / 2


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail probability P(|T| ≥ |t|) of Student's t with df degrees of freedom."""
    return _betai(df / 2.0, 0.5, df / (df + t * t))


def _t_pdf(t: float, df: float) -> float:
    ln = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(ln - (df + 1) / 2 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The p quantile (p > 0.5) of Student's t. Newton's method on the upper tail from the
    normal quantile: the tail is convex there, so every step stays below the root."""
    target = 1.0 - p
    x = statistics.NormalDist().inv_cdf(p)
    for _ in range(200):
        step = (t_sf2(x, df) / 2.0 - target) / _t_pdf(x, df)
        x += step
        if abs(step) < 1e-12 * max(1.0, x):
            break
    return x


def _t_interval(estimate: float, se: float, df: float, n: int) -> tuple[Interval, float]:
    """The LEVEL interval and the two-sided p-value of H0: the true value is 0."""
    if se == 0.0:
        p = 1.0 if estimate == 0.0 else 0.0
        return Interval(estimate, estimate, estimate, n), p
    half = t_quantile(1.0 - (1.0 - LEVEL) / 2.0, df) * se
    return Interval(estimate, estimate - half, estimate + half, n), t_sf2(estimate / se, df)


def no_interval(estimate: float, n: int) -> Interval:
    return Interval(estimate, float("nan"), float("nan"), n)


def mean_interval(values: Sequence[float]) -> tuple[Interval, float]:
    """Mean of per-process values with its t-interval (N − 1 df) and p-value; with fewer than
    MIN_PROCESSES values no interval (NaN bounds, p-value NaN)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0), float("nan")
    estimate = float(v.mean())
    if n < MIN_PROCESSES:
        return no_interval(estimate, n), float("nan")
    return _t_interval(estimate, float(v.std(ddof=1)) / math.sqrt(n), n - 1, n)


def welch_interval(a: Sequence[float], b: Sequence[float]) -> tuple[Interval, float]:
    """mean(b) − mean(a) of two runs' per-process values (unpaired), Welch's t-interval."""
    va, vb = (np.asarray(x, dtype=float) for x in (a, b))
    va, vb = va[~np.isnan(va)], vb[~np.isnan(vb)]
    n = min(len(va), len(vb))
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0), float("nan")
    estimate = float(vb.mean() - va.mean())
    if n < MIN_PROCESSES:
        return no_interval(estimate, n), float("nan")
    qa, qb = va.var(ddof=1) / len(va), vb.var(ddof=1) / len(vb)
    se = math.sqrt(qa + qb)
    if se == 0.0:
        return _t_interval(estimate, 0.0, 1.0, n)
    df = (qa + qb) ** 2 / (qa**2 / (len(va) - 1) + qb**2 / (len(vb) - 1))
    return _t_interval(estimate, se, df, n)


def holm_rejects(pvalues: Sequence[float], alpha: float = 1.0 - LEVEL) -> list[bool]:
    """Holm's step-down: which of m hypotheses are rejected at family-wise level alpha (a NaN
    p-value is never rejected and does not count among the m)."""
    ranked = sorted((p, i) for i, p in enumerate(pvalues) if p == p)
    out = [False] * len(pvalues)
    m = len(ranked)
    for k, (p, i) in enumerate(ranked):
        if p > alpha / (m - k):
            break
        out[i] = True
    return out


def paired_process_difference(a: pd.Series, b: pd.Series) -> tuple[Interval, float]:
    """Per-process median(b) − median(a) (both series indexed by process), over the processes
    both ran in: the mean and its t-interval (N − 1 df)."""
    both = pd.concat({"a": a, "b": b}, axis=1, join="inner").dropna()
    return mean_interval((both["b"] - both["a"]).to_numpy())
