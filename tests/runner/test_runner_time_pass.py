"""The time pass: cells interleaved in seeded rounds, every raw sample kept with its round, one
sample per region entered per step."""

from __future__ import annotations

import itertools
from collections import Counter

from harness.results.tables import COLUMNS
from harness.runner.cells import build_scenario_world
from harness.runner.device import open_device
from harness.runner.time_pass import run_time_pass
from harness.scenario import load_scenario
from syncledger import SyncLedger
from tests.support.runner_fakes import FakeWorld

SETS = [
    "serving.variants=[before, after, dropped]",
    "serving.batch_sizes=[4, 32]",
    "steps={warmup: 1, count: 2, time: 7, time_emu: 7, round_steps: 3}",
]


class _Calls:
    """A builder whose worlds log every call in order: (what, cell label, world's call #)."""

    def __init__(self):
        self.log: list[tuple[str, str, int]] = []

    def __call__(self, sc, cell, device):
        log = self.log

        class Logged(FakeWorld):
            def warmup_and_capture(self) -> None:
                log.append(("setup", cell.label(), -1))
                super().warmup_and_capture()

            def step(self) -> int:
                log.append(("step", cell.label(), self.i))
                return super().step()

        return Logged(sc, cell, device)


def _run(sets, builder):
    sc = load_scenario("nonspec", sets).scenario
    with open_device("emu") as dh:
        rows = run_time_pass(sc, dh.device, "emu", builder, show_progress=False)
    return [dict(zip(COLUMNS["latency"], r)) for r in rows.latency]


def test_cells_interleave_in_seeded_shuffled_rounds():
    calls = _Calls()
    latency = _run(SETS, calls)
    log = calls.log
    n_cells = 8  # 3 variants x 2 batch sizes, and the A/A arm's second `before` of each size
    # all worlds are built, captured and warmed up before any measured step
    first_measured = next(i for i, (what, _c, n) in enumerate(log) if what == "step" and n >= 1)
    assert {c for what, c, _n in log[:first_measured] if what == "setup"} == {
        c for what, c, _n in log if what == "setup"
    }
    assert len({c for _w, c, _n in log}) == n_cells
    # rounds of 3, 3 and 1 steps: each cell runs its steps of a round back to back
    measured = [c for what, c, n in log[first_measured:] if what == "step"]
    bounds = [0, 3 * n_cells, 6 * n_cells, 7 * n_cells]  # a cell may end a round and start the next
    runs = [
        (c, len(list(g)))
        for lo, hi in itertools.pairwise(bounds)
        for c, g in itertools.groupby(measured[lo:hi])
    ]
    assert [n for _c, n in runs] == [3] * n_cells + [3] * n_cells + [1] * n_cells
    orders = [[c for c, _n in runs[i : i + n_cells]] for i in range(0, len(runs), n_cells)]
    assert all(sorted(o) == sorted(orders[0]) for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # shuffled every round
    # the scenario's seed fixes the order; another seed gives another
    again = _Calls()
    _run(SETS, again)
    assert again.log == log
    other = _Calls()
    _run([*SETS, "seed=99"], other)
    assert [e for e in other.log if e[0] == "step"] != [e for e in log if e[0] == "step"]
    # every measured sample carries its round; set-up and warm-up samples none
    rounds = Counter(r["round"] for r in latency if r["region"] == "iteration" and r["step"] >= 1)
    assert rounds == {0: 3 * n_cells, 1: 3 * n_cells, 2: n_cells}
    assert all(r["round"] is None for r in latency if r["step"] < 1)


def test_a_failing_cell_leaves_the_rotation_and_the_others_go_on():
    FakeWorld.broken_variant = "after"
    try:
        latency = _run(SETS, _Calls())
    finally:
        FakeWorld.broken_variant = ""
    steps = Counter(r["variant"] for r in latency if r["region"] == "iteration" and r["step"] >= 1)
    assert steps == {"before": 2 * 2 * 7, "dropped": 2 * 7}  # before: and its A/A arm


class _Recording:
    """The real world, with the regions it enters per step recorded by a ledger."""

    def __init__(self, world):
        self.world = world
        self.findings = world.findings
        self.entered: list[Counter] = []

    def warmup_and_capture(self) -> None:
        self.world.warmup_and_capture()

    def step(self):
        with SyncLedger() as led:
            out = self.world.step()
        self.entered.append(
            Counter((e.region, dict(e.tags).get("forward_mode", "")) for e in led.region_entries)
        )
        return out


def test_one_sample_per_region_entered_per_step():
    """EAGLE enters some regions several times a step (draft steps, verify, draft extend): the
    time pass keeps exactly one host sample per entry — none dropped, none doubled."""
    worlds: list[_Recording] = []

    def builder(sc, cell, device):
        worlds.append(_Recording(build_scenario_world(sc, cell, device)))
        return worlds[-1]

    sets = [
        "serving.batch_sizes=[4]",
        "serving.variants=[after]",
        "serving.context_len=1024",
        "serving.prefill_every=3",
        "steps={warmup: 1, count: 1, time: 4, time_emu: 4, round_steps: 2}",
    ]
    sc = load_scenario("specv2_mirror", [*sets, "serving.mirror=auto"]).scenario
    with open_device("emu") as dh:
        rows = run_time_pass(sc, dh.device, "emu", builder, show_progress=False)
    latency = [dict(zip(COLUMNS["latency"], r)) for r in rows.latency]
    (world,) = worlds
    assert [dict(zip(COLUMNS["outcomes"], r))["status"] for r in rows.outcomes] == ["ok"]
    warmup = sc.steps.warmup
    for step in range(warmup, warmup + 4):
        samples = Counter(
            (r["region"], r["forward_mode"])
            for r in latency
            if r["step"] == step and r["metric"] == "host" and r["region"] != "iteration"
        )
        assert samples == world.entered[step], step
        assert max(samples.values()) > 1  # regions entered more than once in a step
