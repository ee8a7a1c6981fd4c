"""The device idle after each sync site, from device timestamps: the timeline arithmetic on
synthetic timestamps, and the time pass's traced rounds with a tracer that hands back planted
device work."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.results.idle import step_timeline
from harness.results.tables import COLUMNS
from harness.runner.device import open_device
from harness.runner.time_pass import round_plan, run_time_pass
from harness.scenario import load_scenario
from tests.support.runner_fakes import FakeWorld, fake_builder, spin_us

US = 1000  # ns


def test_each_idle_gap_goes_to_the_last_call_before_it():
    # step from 0: busy 0-100; call A at 100 (waits 20); idle to 400; busy 400-450;
    # call B at 500 (waits 5); idle to 900; busy 900-1000
    work = [(0, 100), (400, 450), (900, 1000), (-50, 10)]  # one began before the step
    tl = step_timeline(0, work, [(100, 20), (500, 5)])
    assert tl.busy_ns == 100 + 50 + 100
    assert tl.span_ns == 1000
    # A: idle in [100, 500) = 350 (not B's gap); B: idle in [500, 1000) = 400
    assert tl.idle_after_ns == (350, 400)


def test_a_call_while_the_device_stays_busy_has_no_idle_after():
    tl = step_timeline(0, [(0, 1000)], [(200, 50)])
    assert tl.idle_after_ns == (0,)


def test_traced_rounds_are_spread_among_the_others():
    plan = round_plan(20, 10, 5)  # 4 rounds of 5, 2 traced rounds of 5
    assert [n for n, _t in plan] == [5] * 6
    assert [i for i, (_n, traced) in enumerate(plan) if traced] == [1, 4]
    assert round_plan(7, 0, 5) == [(5, False), (2, False)]


class _PlantedTracer:
    """Hands back the device work a world logs through FakeWorld.after_spin: a kernel that
    starts when the host is done with the step's spin (so the device idled since the last
    sync), on a clock 5 ms ahead of perf_counter_ns."""

    OFFSET = 5_000_000

    def __init__(self):
        self.work: list[tuple[int, int]] = []
        self.on = False

    def start(self) -> None:
        self.on = True

    def stop(self) -> list[tuple[int, int]]:
        self.on, out, self.work = False, self.work, []
        return out

    def offset_ns(self) -> int:
        return self.OFFSET

    def kernel(self) -> None:
        if self.on:
            now = time.perf_counter_ns() + self.OFFSET
            self.work.append((now, now + 50 * US))
            spin_us(50)  # the step's end waits for it, as the time pass's does on CUDA


def test_a_planted_idle_gap_is_attributed_to_the_site_before_it(monkeypatch):
    tracer = _PlantedTracer()
    monkeypatch.setattr(FakeWorld, "extra_sync", True)  # a second site, after the eager read
    monkeypatch.setattr(FakeWorld, "spin", ("dropped", 20000.0))  # the gap: host work, 20 ms
    monkeypatch.setattr(FakeWorld, "after_spin", tracer.kernel)
    sets = [
        "serving.variants=[dropped]",  # one cell: no A/A twin (dropped is not the reference)
        "serving.batch_sizes=[32]",  # eager: a device read in step/metadata/eager first
        "steps={warmup: 0, time_emu: 2, trace: 2, round_steps: 2}",
    ]
    sc = load_scenario("nonspec", sets).scenario
    with open_device("emu") as dh:
        rows = run_time_pass(
            sc, dh.device, "emu", fake_builder, False, tracer_for=lambda kind: (tracer, "planted")
        )
    assert rows.notes == {"device_trace": "planted"}
    waits = [dict(zip(COLUMNS["waits"], r)) for r in rows.waits]
    traced = [w for w in waits if w["traced"] == 1]
    assert traced and all(w["idle_after_us"] is None for w in waits if w["traced"] == 0)
    planted = [w for w in traced if "PLANTED" in _line_of(w["site"])]
    eager = [w for w in traced if "PLANTED" not in _line_of(w["site"])]
    assert len(planted) == len(eager) == 2  # the 2 traced steps, each with both sites
    # the gap follows the planted sync (the last before it), not the eager read before that
    assert all(w["idle_after_us"] >= 20000 for w in planted)
    assert all(w["idle_after_us"] < 20000 for w in eager)
    lat = [dict(zip(COLUMNS["latency"], r)) for r in rows.latency]
    busy = [r["value"] for r in lat if r["traced"] == 1 and r["metric"] == "busy"]
    assert busy == [pytest.approx(50.0)] * 2  # the one planted kernel of each traced step
    assert sum(r["traced"] == 0 and r["metric"] == "host" and r["region"] == "iteration"
               for r in lat) == 2  # fmt: skip


def test_a_tracer_that_fails_drops_its_rounds_and_says_why():
    class Broken(_PlantedTracer):
        def start(self) -> None:
            raise RuntimeError("no CUPTI here")

    sets = ["serving.variants=[before]", "serving.batch_sizes=[4]", "steps.trace=2"]
    sc = load_scenario("nonspec", [*sets, "steps.time_emu=2"]).scenario
    with open_device("emu") as dh:
        rows = run_time_pass(
            sc, dh.device, "emu", fake_builder, False, tracer_for=lambda k: (Broken(), "x")
        )
    assert "failed" in rows.notes["device_trace"] and "no CUPTI here" in rows.notes["device_trace"]
    assert not [r for r in rows.latency if r[COLUMNS["latency"].index("traced")]]


def _line_of(site: str) -> str:
    path, line = site.rsplit(":", 1)
    return Path(path).read_text().splitlines()[int(line) - 1]
