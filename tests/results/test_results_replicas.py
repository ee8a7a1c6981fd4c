"""Intervals between worker processes (harness.results.replicas, harness.results.deltas) on
synthetic data with a known answer: each process has its own level (fresh allocations, fresh
worlds), far larger than the spread of its steps, as measured between fresh processes on an
H200; the seeds are fixed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.results import replicas
from harness.results.deltas import CellRates, format_time_delta, noise_floor, paired_delta

N = 5  # processes, as the README's headline runs
STEPS = 40
BETWEEN = 40.0  # µs: spread of a process's level
WITHIN = 5.0  # µs: spread of steps inside one process
CELL_JITTER = 4.0  # µs: a cell's own level in one process (its world is built in that process)


def _run(rng: np.random.Generator, shift: float) -> tuple[CellRates, CellRates, CellRates]:
    """Three cells of one run of N processes: `before`, a cell `shift` µs slower, and the A/A
    arm (`before` built a second time)."""
    index = pd.MultiIndex.from_product([range(N), range(STEPS)], names=["process", "step"])
    level = np.repeat(500 + rng.normal(0, BETWEEN, N), STEPS)

    def cell(extra: float) -> CellRates:
        own = np.repeat(rng.normal(0, CELL_JITTER, N), STEPS)
        values = level + own + extra + rng.normal(0, WITHIN, N * STEPS)
        return CellRates({}, pd.Series(values, index=index))

    return cell(0.0), cell(shift), cell(0.0)


def test_t_quantile_inverts_the_two_sided_tail():
    for df in (1, 4, 9.5, 200):
        q = replicas.t_quantile(0.975, df)
        assert replicas.t_sf2(q, df) == pytest.approx(0.05, abs=1e-9)
    assert replicas.t_quantile(0.975, 4) == pytest.approx(2.7764, abs=1e-4)  # the t table's


def test_t_interval_over_five_processes_covers_95_percent_and_a_bootstrap_does_not():
    rng = np.random.default_rng(1)
    trials, truth = 2000, 10.0
    medians = truth + rng.normal(0, BETWEEN, (trials, N))
    covered = 0
    for row in medians:
        ci, _p = replicas.mean_interval(row)
        covered += ci.low <= truth <= ci.high
    assert abs(covered / trials - 0.95) < 0.025
    # a percentile bootstrap over the same 5 processes is too narrow
    boot = medians[:, rng.integers(0, N, (trials, 500, N))[0]].mean(axis=2)
    low, high = np.percentile(boot, [2.5, 97.5], axis=1)
    assert ((low <= truth) & (truth <= high)).mean() < 0.9


def test_welch_interval_between_two_runs_covers_95_percent():
    rng = np.random.default_rng(2)
    trials, covered = 1000, 0
    for _ in range(trials):
        a = rng.normal(500, BETWEEN, N)
        b = rng.normal(530, 2 * BETWEEN, N)
        ci, _p = replicas.welch_interval(a, b)
        covered += ci.low <= 30 <= ci.high
    assert abs(covered / trials - 0.95) < 0.025


def test_no_shift_is_no_difference_in_at_least_95_percent_of_trials():
    """The rule as printed: an interval that excludes 0, and a Δ beyond the A/A noise floor."""
    rng = np.random.default_rng(3)
    trials = 200
    flagged = 0
    for _ in range(trials):
        before, same, twin = _run(rng, 0.0)
        floor = noise_floor(paired_delta(before, twin))
        flagged += not format_time_delta(paired_delta(before, same), floor).endswith(
            ("no measurable difference", "within the noise floor")
        )
    assert flagged / trials <= 0.05


def test_a_planted_30us_shift_is_resolved_beside_the_noise_floor():
    rng = np.random.default_rng(4)
    before, slower, twin = _run(rng, 30.0)
    floor = noise_floor(paired_delta(before, twin))
    ci = paired_delta(before, slower)
    assert ci.n == N and ci.low > 0 and 30 - 15 < ci.estimate < 30 + 15
    assert floor < ci.estimate
    text = format_time_delta(ci, floor)
    assert "noise floor" in text and not text.endswith(("difference", "floor"))


def test_a_delta_within_the_noise_floor_is_not_a_difference():
    rng = np.random.default_rng(5)
    before, slower, _twin = _run(rng, 30.0)
    ci = paired_delta(before, slower)
    assert ci.excludes_zero
    assert format_time_delta(ci, floor=ci.estimate + 1).endswith("within the noise floor")


def test_holm_steps_down():
    # sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: stop there
    assert replicas.holm_rejects([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
    assert replicas.holm_rejects([0.04, float("nan")]) == [True, False]
    assert replicas.holm_rejects([]) == []


def test_one_process_has_no_interval():
    ci, p = replicas.mean_interval([3.0])
    assert ci.estimate == 3.0 and ci.low != ci.low and p != p
    ci, p = replicas.welch_interval([1.0, 2.0], [4.0])
    assert ci.low != ci.low
