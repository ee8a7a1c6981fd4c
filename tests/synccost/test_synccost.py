"""The sync-cost experiment: cells from the scenario, exactly k syncs per step in the count
pass (the ledger and the injection agree), µs per sync from known samples, end to end."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.cli import main
from harness.errors import InputError
from harness.results.rates import measured
from harness.results.tables import PASS_COLUMNS
from harness.runner.cells import cells
from harness.runner.count_pass import run_count_pass
from harness.runner.device import open_device
from harness.scenario import load_scenario
from harness.synccost import world as synccost_world
from harness.synccost.analysis import count_problems, sync_costs
from harness.synccost.cases import INJECTIONS, SyncCostCase, enumerate_cases, parse_case

SMALL = ["sync_cost.forward_us=[0, 1000]", "steps={warmup: 1, count: 3, time: 2, time_emu: 2}"]


def _frame(rows, table: str) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(PASS_COLUMNS[table]))


def test_cases_and_labels():
    cases = enumerate_cases(["item", "stream_sync"], [0, 1, 2], [200.0, 1000.0])
    assert [c.label for c in cases[:3]] == [
        "none k=0 fwd=200us",
        "item k=1 fwd=200us",
        "item k=2 fwd=200us",
    ]
    assert len(cases) == 2 * (1 + 2 * 2)  # k = 0 once per forward duration
    for case in cases:
        assert parse_case(case.label) == case
    assert parse_case("before") is None and parse_case("item k=x fwd=1us") is None


def test_scenario_cells_and_its_checks():
    sc = load_scenario("sync_cost").scenario
    assert sc.world == "sync_cost"
    labels = {c.case for c in cells(sc)}
    assert "blocking_copy k=4 fwd=4000us" in labels and "none k=0 fwd=0us" in labels
    # no backend variant, no mirror: those columns stay empty rather than hold a case
    assert {(c.variant, c.mirror, c.batch_size) for c in cells(sc)} == {("", "", 64)}
    with pytest.raises(InputError, match=r"sections sync_cost \+ serving are not one world's"):
        load_scenario("sync_cost", ["serving.variants=[after]"])
    with pytest.raises(
        InputError, match=r"did you mean 'serving.batch_sizes' or 'sync_cost.batch_sizes'"
    ):
        load_scenario("sync_cost", ["batch_sizes=[8]"])
    with pytest.raises(InputError, match=r"sync_cost.kinds: .*did you mean 'item'"):
        load_scenario("sync_cost", ["sync_cost.kinds=[itme]"])


def test_count_pass_sees_exactly_k_syncs_of_the_injected_kind():
    sc = load_scenario("sync_cost", SMALL).scenario
    with open_device("emu") as dh:
        rows = run_count_pass(sc, dh.device, show_progress=False)
    counts, syncs = _frame(rows.counts, "counts"), _frame(rows.syncs, "syncs")
    assert count_problems(counts, syncs) == []
    m = measured(counts)
    per_step = m.groupby(["case", "step"])["syncs"].sum()
    inject = m[m["region"] == "step/metadata/inject"].groupby(["case", "step"])["syncs"].sum()
    for (label, _step), n in per_step.items():
        case = parse_case(label)
        assert n == case.k and inject.get((label, _step), 0) == case.k, label
    kinds = measured(syncs, counts).groupby("case")["kind"].agg(set)
    for label, got in kinds.items():
        assert got == {INJECTIONS[parse_case(label).kind]}, label


def test_a_planted_extra_sync_is_caught(monkeypatch):
    """Known-bad input: an injection that syncs twice must not pass as k syncs."""

    def item_twice(w) -> None:
        w.dev_lens.sum().item()
        w.dev_lens.max().item()

    monkeypatch.setitem(synccost_world._INJECT, "item", item_twice)
    sc = load_scenario("sync_cost", [*SMALL, "sync_cost.kinds=[item]", "sync_cost.k=[0, 1]"])
    with open_device("emu") as dh:
        rows = run_count_pass(sc.scenario, dh.device, show_progress=False)
    problems = count_problems(_frame(rows.counts, "counts"), _frame(rows.syncs, "syncs"))
    assert len(problems) == 2 and all("expected 1 of ['d2h_read']" in p for p in problems)


def test_a_sync_of_another_kind_is_caught(monkeypatch):
    """Known-bad input: one sync per k, but not the kind injected, must not pass."""
    monkeypatch.setitem(synccost_world._INJECT, "item", synccost_world._INJECT["stream_sync"])
    sc = load_scenario("sync_cost", [*SMALL, "sync_cost.kinds=[item]", "sync_cost.k=[0, 1]"])
    with open_device("emu") as dh:
        rows = run_count_pass(sc.scenario, dh.device, show_progress=False)
    problems = count_problems(_frame(rows.counts, "counts"), _frame(rows.syncs, "syncs"))
    assert len(problems) == 2 and all("['explicit']" in p for p in problems), problems


def _steps(cases: dict[SyncCostCase, np.ndarray]) -> pd.DataFrame:
    rows = [
        ("sync_cost", case.label, "", "", 64, 0, "", 0, step, "e2e", float(v))
        for case, values in cases.items()
        for step, v in enumerate(values)
    ]
    cols = [
        "scenario", "case", "variant", "mirror", "batch_size", "rank", "arm", "process", "step",
        "metric", "value_us",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def test_cost_per_sync_from_known_samples():
    """First sync +106 µs (it waits for the forward), each further one +14 µs (idle queue)."""
    rng = np.random.default_rng(0)
    base = 4000 + rng.normal(0, 8, 300)
    truth = {0: 0.0, 1: 106.0, 2: 120.0, 4: 148.0}
    cases = {
        SyncCostCase("none" if k == 0 else "item", k, 4000.0): base + dt + rng.normal(0, 3, 300)
        for k, dt in truth.items()
    }
    (cost,) = sync_costs(_steps(cases), "e2e")
    assert (cost.kind, cost.forward_us, cost.ks) == ("item", 4000.0, (0, 1, 2, 4))
    assert cost.first.low < 106 < cost.first.high
    assert cost.further.low < 14 < cost.further.high
    slope = np.polyfit([0, 1, 2, 4], [0, 106, 120, 148], 1)[0]
    assert cost.per_sync.low < slope < cost.per_sync.high


def test_bench_end_to_end_on_the_emulated_device(tmp_path, capsys):
    out = tmp_path / "runs"
    args = ["bench", "--scenario", "sync_cost", "--device", "emu", "--out", str(out)]
    assert main([*args, "--no-progress", *(x for s in SMALL for x in ("--set", s))]) == 0
    text = capsys.readouterr().out
    assert "What one sync costs" in text
    assert "count pass: every cell made exactly k syncs per step, of the injected kind" in text
    assert "emulated device: host time only, no pipeline bubble" in text
    assert "Syncs per measured step" not in text and "vs before" not in text
    (folder,) = (out / "sync_cost").iterdir()
    table = text.split("paired by step:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table[0].split()[:3] == ["forward_us", "bs", "kind"]
    assert len(table) == 1 + 2 * len(INJECTIONS)  # a row per forward duration and kind
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["config"]["sync_cost"]["forward_us"] == [0.0, 1000.0]
    assert main(["report", str(folder)]) == 0
    assert [p.name for p in sorted((folder / "plots").glob("*.png"))] == ["01_sync_cost.png"]
