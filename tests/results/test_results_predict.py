"""A Δ the sync costs predict beside the measured one; the A/A false-positive rate; runs of
result format 6 still open (upgraded as read)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.errors import InputError
from harness.results.deltas import cell_rates, paired_delta
from harness.results.false_positives import Verdicts, verdicts
from harness.results.load import load_run
from harness.results.predict import prediction_section
from harness.results.samples import step_times
from harness.results.tables import COLUMNS
from harness.serving.vocabulary import serving_vocabulary
from tests.support.report_fixtures import reseal, write_run


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return load_run(write_run(root, "eagle", device="cuda", batch_sizes=(8,), steps=8))


def _line(run, variant: str) -> str:
    (line,) = [x for x in prediction_section(run, serving_vocabulary()) if f"bs=8 {variant}:" in x]
    return line


def test_a_prediction_that_misses_is_reported_with_what_is_unexplained(gpu_run):
    # traced: before's mirror read costs min(8, 600) = 8 µs a step, gone in `dropped`; the
    # fixture's e2e moves by 25 µs per sync, far more
    line = _line(gpu_run, "dropped")
    assert "predicted −8.0 µs" in line and "harness/serving/mirror.py:126 −8.0 (removed)" in line
    assert "outside the measured interval; unexplained −" in line
    assert "host time per step that moved most: step/" in line


def test_a_prediction_inside_the_measured_interval_says_so(gpu_run):
    steps = step_times(gpu_run.latency)
    rates = cell_rates(gpu_run.counts.iloc[0:0], steps, "e2e")
    ref, cell = (next(c for c in rates if c[2] == v and c[6] == "") for v in ("before", "dropped"))
    measured = paired_delta(rates[ref], rates[cell]).estimate
    waits = gpu_run.traced_waits.copy()
    mirror = waits["site"] == "harness/serving/mirror.py:126"
    waits.loc[mirror, "wait_ns"] = -measured * 1e3  # the read now costs what was measured
    waits.loc[mirror, "idle_after_us"] = 1e6
    run = type(gpu_run)(**{**gpu_run.__dict__, "traced_waits": waits})
    assert _line(run, "dropped").endswith("the prediction lies inside the measured interval")


def test_on_the_emulated_device_the_prediction_says_device_time_is_not_measured(tmp_path):
    run = load_run(write_run(tmp_path, "eagle", device="emu", batch_sizes=(8,), steps=4))
    assert "device time is not measured" in prediction_section(run, serving_vocabulary())[0]


def _medians(values: list[float]):
    from harness.results.deltas import CellRates

    s = pd.Series(values, index=pd.MultiIndex.from_arrays([range(len(values)), [0] * len(values)],
                                                          names=["process", "step"]))  # fmt: skip
    return CellRates({}, s)


def test_aa_verdicts_are_counted_over_disjoint_groups_of_processes():
    cell, twin = ("s", "", "before", "auto", 4, 0, ""), ("s", "", "before", "auto", 4, 0, "aa")
    a = [100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0]
    shifted = [v + 50 + 0.1 * i for i, v in enumerate(a)]  # a planted difference: all flagged
    assert verdicts({cell: _medians(a), twin: _medians(shifted)}, 3) == Verdicts(3, 2, 2)
    same = [v + (0.3 if i % 2 else -0.3) for i, v in enumerate(a)]
    assert verdicts({cell: _medians(a), twin: _medians(same)}, 2) == Verdicts(2, 3, 0)


def test_the_false_positive_rate_has_an_exact_binomial_interval():
    lo, hi = Verdicts(2, 40, 0).interval()
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 40), abs=1e-6)  # 8.8%
    lo, hi = Verdicts(2, 40, 2).interval()
    assert (round(lo, 4), round(hi, 4)) == (0.0061, 0.1692)


def _as_format_6(folder) -> None:
    new = {"latency": ["traced"], "waits": ["start_us", "idle_after_us", "traced"]}
    for table, cols in new.items():
        path = folder / f"{table}.csv"
        df = pd.read_csv(path, keep_default_na=False)
        df = df[df["traced"].astype(str) != "1"].drop(columns=cols)
        df.to_csv(path, index=False)
        reseal(folder, path.name)
    meta = json.loads((folder / "meta.json").read_text())
    meta["result_format_version"] = 6
    (folder / "meta.json").write_text(json.dumps(meta))


def test_a_run_of_format_6_opens_with_nothing_traced(tmp_path):
    folder = write_run(tmp_path, "eagle", device="cuda", batch_sizes=(8,), steps=4)
    _as_format_6(folder)
    run = load_run(folder)
    assert run.traced_latency.empty and run.traced_waits.empty and not run.latency.empty
    assert list(run.waits.columns) == list(COLUMNS["waits"])
    meta = json.loads((folder / "meta.json").read_text())
    meta["result_format_version"] = 3  # older than the oldest upgrade: refused
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="result format version 3"):
        load_run(folder)
