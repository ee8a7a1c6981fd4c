"""The real programs as a world: a scenario whose cells are programs, each step one call of the
program's step; the count pass sees, call for call, the syncs the suite expects of it."""

from __future__ import annotations

from collections import Counter

import pytest

from harness.programs.suite import load_expected, site_key
from harness.results.tables import COLUMNS
from harness.runner.cells import cells, runner_part
from harness.runner.count_pass import run_count_pass
from harness.runner.device import open_device
from harness.scenario import load_scenario
from syncledger import SyncKind

FAST = ["embedding_lm_train", "distributions_validated", "nn_utils_rnn_clip"]


def test_the_scenario_names_a_cell_per_program_and_is_not_gated():
    sc = load_scenario("real_programs").scenario
    assert sc.world == "programs" and not runner_part(sc).gated
    got = cells(sc)
    assert [c.case for c in got] == sc.section("programs").names
    assert {(c.variant, c.mirror, c.batch_size) for c in got} == {("", "", 0)}


@pytest.mark.slow
def test_a_first_call_makes_the_syncs_the_suite_expects():
    overrides = [f"programs.names={FAST}", "steps.warmup=0", "steps.count=1"]
    sc = load_scenario("real_programs", overrides).scenario
    with open_device("emu") as dh:
        rows = run_count_pass(sc, dh.device, show_progress=False)
    syncs = [dict(zip(COLUMNS["syncs"], r)) for r in rows.syncs]
    expected = load_expected()
    for name in FAST:
        seen = Counter(
            site_key(s["location"], s["kind"])
            for s in syncs
            if s["case"] == name and s["step"] == 0 and SyncKind(s["kind"]).is_sync
        )
        assert seen == Counter(expected[name]["syncs"]), name
