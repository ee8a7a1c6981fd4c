"""The model is trusted because each of its syncs is traced to upstream sglang.

1. The fidelity table (harness/fidelity/upstream_syncs.yaml) is walked row by row: the run it
   names produces the sync through the anchored project line for each variant where upstream
   has it, none where upstream has none, and fails there where upstream fails.
2. The expected syncs per measured step, from upstream, hold exactly in every committed
   scenario and what-if, decode and prefill steps separately.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import pytest

from harness.fidelity import VARIANTS, anchors, load_table
from harness.results.tables import COLUMNS, MEASURED_PATHS
from harness.runner.count_pass import PassRows, run_count_pass
from harness.scenario import load_scenario
from harness.sync import emulated_device

TABLE = load_table()
ANCHORS = anchors()
EXCEPTIONS = ("AssertionError", "AttributeError")


@cache
def count_pass(scenario: str, overrides: tuple[str, ...]) -> PassRows:
    sc = load_scenario(scenario, list(overrides)).scenario
    with emulated_device() as dev:
        return run_count_pass(sc, dev, show_progress=False)


def _records(rows: PassRows, table: str) -> list[dict]:
    return [dict(zip(COLUMNS[table], r)) for r in rows.__dict__[table]]


# ---- the table walked -------------------------------------------------------------------------
def test_every_anchor_names_a_row_and_every_reachable_row_has_one() -> None:
    ids = {r.id for r in TABLE.rows}
    assert set(ANCHORS) <= ids, f"anchors without a row: {sorted(set(ANCHORS) - ids)}"
    for row in TABLE.rows:
        if row.reach is not None:
            assert len(ANCHORS.get(row.id, [])) == 1, row.id
        else:
            assert row.unreachable, f"{row.id}: neither reached nor said unreachable"
        for v in VARIANTS:
            assert row.upstream[v]["effect"], (row.id, v)


def _through(rows: PassRows, variant: str, anchor: tuple[str, int]) -> list[dict]:
    """Sync events of a variant whose stack passes through the anchored line."""
    mark = f"{anchor[0]}:{anchor[1]} in "
    return [
        s
        for s in _records(rows, "syncs")
        if s["variant"] == variant and any(f.startswith(mark) for f in rows.stacks[s["stack_id"]])
    ]


@pytest.mark.parametrize("row", [r for r in TABLE.rows if r.reach], ids=lambda r: r.id)
def test_row_is_reproduced(row) -> None:
    (anchor,) = ANCHORS[row.id]
    rows = count_pass(row.reach.scenario, ("steps.count=4", *row.reach.overrides))
    outcomes = {o["variant"]: o for o in _records(rows, "outcomes")}
    for variant, want in row.reach.expect.items():
        seen = _through(rows, variant, anchor)
        if want in EXCEPTIONS:
            o = outcomes[variant]
            assert (o["status"], o["exception"]) == ("error", want), (row.id, variant, o)
            assert o["location"] == f"{anchor[0]}:{anchor[1]}", (row.id, variant, o)
        elif want == "none":
            assert seen == [], (row.id, variant, seen[:2])
        else:
            assert seen, f"{row.id}: {variant} makes no sync through {anchor}"
            assert {s["kind"] for s in seen} == {want}, (row.id, variant)


@pytest.mark.parametrize("row", [r for r in TABLE.rows if r.unreachable], ids=lambda r: r.id)
def test_unreachable_rows_stay_unreached(row) -> None:
    """No committed scenario (nor any row's run) goes through an unreachable row's line."""
    if row.id not in ANCHORS:
        return
    (anchor,) = ANCHORS[row.id]
    runs = {
        (r.reach.scenario, ("steps.count=4", *r.reach.overrides)) for r in TABLE.rows if r.reach
    }
    for name in SCENARIOS:
        runs.add((name, SHORT))
    for key in sorted(runs):
        rows = count_pass(*key)
        assert all(_through(rows, v, anchor) == [] for v in VARIANTS), (row.id, key)


# ---- expected syncs per measured step --------------------------------------------------------
SHORT = ("steps.warmup=2", "steps.count=8")  # a prefill step (every 8th) is measured
SCENARIOS = ("nonspec", "eagle", "specv2_mirror", "direct_no_mirror")

# (scenario, overrides) -> variant -> (syncs per decode step, per prefill step), an exception,
# or a dict by batch size; None = no such step in the scenario
EXPECTED = {
    ("nonspec", SHORT): {v: (0, 1) for v in VARIANTS},
    ("eagle", SHORT): {v: (1, 3) for v in VARIANTS},
    ("specv2_mirror", (*SHORT, "serving.mirror=auto")): {
        "before": (1, 2),
        "after": (1, 2),
        "dropped": (0, 2),
    },
    ("specv2_mirror", (*SHORT, "serving.mirror=absent")): {
        "before": "AssertionError",
        "after": "AttributeError",
        "dropped": (0, 2),
    },
    ("specv2_mirror", (*SHORT, "serving.mirror=present")): {
        "before": (1, 2),
        "after": (1, 2),
        "dropped": (1, 2),
    },
    ("direct_no_mirror", SHORT): {
        "before": "AssertionError",
        # eager builds read max_seq_len (F01) and the eager draft extend its length list (F02):
        # graph replay (bs 4) leaves the draft extend's 2; eager (bs 48) adds 2 draft steps
        # and the verify
        "after": {4: (2, None), 48: (5, None)},
        "dropped": (0, None),
    },
}


def per_step_syncs(rows: PassRows) -> dict[tuple, dict[str, set[int]]]:
    """(variant, batch size) -> step kind -> the set of sync totals its measured steps make."""
    steps: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(lambda: [0, "decode"]))
    for c in _records(rows, "counts"):
        if c["path"] not in MEASURED_PATHS:
            continue
        s = steps[(c["variant"], c["batch_size"])][c["step"]]
        s[0] += c["syncs"]
        if c["forward_mode"] == "EXTEND":
            s[1] = "prefill"
    out: dict[tuple, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for cell, by_step in steps.items():
        for total, kind in by_step.values():
            out[cell][kind].add(total)
    return out


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: " ".join((k[0], *k[1][2:])))
def test_expected_syncs_per_measured_step(key) -> None:
    rows = count_pass(*key)
    got = per_step_syncs(rows)
    outcomes = _records(rows, "outcomes")
    for variant, want in EXPECTED[key].items():
        mine = [o for o in outcomes if o["variant"] == variant]
        assert mine, (key, variant)
        if isinstance(want, str):
            assert {(o["status"], o["exception"]) for o in mine} == {("error", want)}, mine
            continue
        for o in mine:
            assert o["status"] == "ok", o
            bs = o["batch_size"]
            decode, prefill = want[bs] if isinstance(want, dict) else want
            cell = got[(variant, bs)]
            assert cell["decode"] == {decode}, (key, variant, bs, dict(cell))
            if prefill is None:
                assert "prefill" not in cell, (key, variant, bs)
            else:
                assert cell["prefill"] == {prefill}, (key, variant, bs, dict(cell))


def test_serving_scenarios_report_no_stale_mirror() -> None:
    for name in ("nonspec", "eagle", "specv2_mirror"):
        assert _records(count_pass(name, SHORT), "findings") == [], name
