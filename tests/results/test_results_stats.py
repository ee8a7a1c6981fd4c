"""Bootstrap intervals of medians: right where the truth is known, seeded, paired by step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.results import stats


def _steps(values) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=float), index=np.arange(len(values)))


def test_a_shift_is_measured_and_no_shift_is_not():
    rng = np.random.default_rng(1)
    a = _steps(rng.normal(1000, 30, 200))
    same = stats.median_difference(a, _steps(rng.normal(1000, 30, 200)))
    assert not same.excludes_zero and same.n == 200
    shifted = stats.median_difference(a, _steps(rng.normal(1100, 30, 200)))
    assert shifted.excludes_zero and shifted.low < 100 < shifted.high
    assert shifted.estimate == pytest.approx(100, abs=15)


def test_intervals_cover_the_truth_at_their_level():
    """30 experiments with no true difference: about 95% of intervals hold 0 (at least 25)."""
    rng = np.random.default_rng(7)
    held = 0
    for _ in range(30):
        a, b = _steps(rng.exponential(100, 100)), _steps(rng.exponential(100, 100))
        held += not stats.median_difference(a, b).excludes_zero
    assert held >= 25


def test_paired_by_step_uses_common_steps_only():
    a = pd.Series([1.0, 2.0, 3.0, 4.0], index=[10, 11, 12, 13])
    b = pd.Series([5.0, 6.0, 7.0], index=[11, 12, 14])
    ci = stats.median_difference(a, b)
    assert ci.n == 2 and ci.estimate == pytest.approx(5.5 - 2.5)  # steps 11 and 12


def test_pairing_by_step_removes_the_step_to_step_spread():
    """Both cells see the same batches: step s of B is step s of A plus 10 µs. Paired, the
    interval is tight around 10; the steps' own spread (hundreds of µs) does not widen it."""
    rng = np.random.default_rng(3)
    a = _steps(rng.uniform(0, 1000, 200))
    ci = stats.median_difference(a, a + 10)
    assert ci.low == pytest.approx(10) and ci.high == pytest.approx(10)


def test_seeded_and_degenerate_inputs():
    rng = np.random.default_rng(2)
    a, b = _steps(rng.normal(0, 1, 50)), _steps(rng.normal(0, 1, 50))
    assert stats.median_difference(a, b) == stats.median_difference(a, b)
    one = stats.median_difference(_steps([1.0]), _steps([3.0]))
    assert one.estimate == 2.0 and one.low != one.low and one.n == 1
    none = stats.median_interval(pd.Series(dtype=float))
    assert none.n == 0 and none.estimate != none.estimate


def test_slope_of_medians_against_the_dose():
    rng = np.random.default_rng(5)
    by_k = {k: _steps(1000 + 50 * k + rng.normal(0, 5, 100)) for k in (0, 1, 2, 4)}
    ci = stats.median_slope(by_k)
    assert ci.low < 50 < ci.high and ci.high - ci.low < 5
    assert stats.median_slope({1: by_k[1]}).estimate != stats.median_slope({1: by_k[1]}).estimate


@pytest.mark.parametrize("n", [1, 2, 3, 8, 51, 200])
def test_resampled_medians_are_numpys_bit_for_bit(n):
    """Ties, infinities and NaN included: the intervals stay the ones np.median gives."""
    rng = np.random.default_rng(n)
    values = rng.lognormal(size=(n, 3))
    values[::3, 0] = values[0, 0]  # ties
    values[1::4, 1] = np.inf
    values[::5, 2] = np.nan
    idx = rng.integers(0, n, size=(500, n))
    expected = np.median(values[idx], axis=1)
    assert np.array_equal(stats.resampled_medians(values, idx), expected, equal_nan=True)
