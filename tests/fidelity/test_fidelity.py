"""The model is trusted because each of its syncs is traced to upstream sglang.

1. The fidelity table (harness/fidelity/upstream_syncs.yaml) is walked row by row: the run it
   names produces the sync through the anchored project line for each variant where upstream
   has it, none where upstream has none, and fails there where upstream fails. Rows of code
   that runs in processes of its own (DP attention) name an in-process probe instead: one
   rank's exchange over a one-rank gloo group, one rank's forward batches.
2. The expected syncs per measured step, from upstream, hold exactly in every committed
   scenario and what-if, decode and prefill steps separately.

Count passes come from the session's `count_passes` (tests/conftest.py): the committed
scenarios' passes are the ones the strict gate (tests/integration/test_gate_strict.py) compares.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import cache

import pytest

from harness.fidelity import anchors, load_table
from harness.results.tables import COLUMNS, MEASURED_PATHS
from harness.runner.count_pass import PassRows
from harness.scenario import LoadedScenario, load_scenario
from harness.scenario.loader import parse_override
from harness.serving.section import serving_of
from harness.variants import variant_names

TABLE = load_table()
ANCHORS = anchors()
EXCEPTIONS = ("AssertionError", "AttributeError")


Cells = dict[str, set]  # column -> the values of the cells a check reads (empty: every cell)
# overrides that only pick cells of a scenario: its list, and the column that names the pick
CELL_PICKS = {
    "serving.batch_sizes": "batch_size",
    "serving.mirror": "mirror",
    "serving.variants": "variant",
}


def _records(rows: PassRows, table: str, cells: Cells | None = None) -> list[dict]:
    records = [dict(zip(COLUMNS[table], r)) for r in rows.__dict__[table]]
    return [r for r in records if all(r[col] in v for col, v in (cells or {}).items())]


# ---- the table walked -------------------------------------------------------------------------
def test_every_anchor_names_a_row_and_every_reachable_row_has_one() -> None:
    ids = {r.id for r in TABLE.rows}
    assert set(ANCHORS) <= ids, f"anchors without a row: {sorted(set(ANCHORS) - ids)}"
    for row in TABLE.rows:
        if row.reach is not None:
            assert len(ANCHORS.get(row.id, [])) == 1, row.id
        else:
            assert row.unreachable, f"{row.id}: neither reached nor said unreachable"
        for v in variant_names():
            assert row.upstream[v]["effect"], (row.id, v)


def _through(
    rows: PassRows, variant: str, anchor: tuple[str, int], cells: Cells | None = None
) -> list[dict]:
    """Sync events of a variant whose stack passes through the anchored line."""
    mark = f"{anchor[0]}:{anchor[1]} in "
    return [
        s
        for s in _records(rows, "syncs", cells)
        if s["variant"] == variant and any(f.startswith(mark) for f in rows.stacks[s["stack_id"]])
    ]


@pytest.mark.parametrize(
    "row", [r for r in TABLE.rows if r.reach and r.reach.scenario], ids=lambda r: r.id
)
def test_row_is_reproduced(row, count_passes) -> None:
    (anchor,) = ANCHORS[row.id]
    loaded, cells = _row_run(row)
    rows = count_passes(loaded)
    outcomes = {o["variant"]: o for o in _records(rows, "outcomes", cells)}
    for variant, want in row.reach.expect.items():
        seen = _through(rows, variant, anchor, cells)
        if want in EXCEPTIONS:
            o = outcomes[variant]
            assert (o["status"], o["exception"]) == ("error", want), (row.id, variant, o)
            assert o["location"] == f"{anchor[0]}:{anchor[1]}", (row.id, variant, o)
        elif want == "none":
            assert seen == [], (row.id, variant, seen[:2])
        else:
            assert seen, f"{row.id}: {variant} makes no sync through {anchor}"
            assert {s["kind"] for s in seen} == {want}, (row.id, variant)


# ---- probes: in-process runs of code that runs in processes of its own --------------------------
def _probe_dp_exchange(case: str) -> list:
    """One rank's exchange of a decode record over a one-rank gloo group, `case` its backend."""
    from harness.batch.info import ForwardMode
    from harness.dp.backends import EXCHANGE_BACKENDS
    from harness.dp.exchange import MLPSyncExchange
    from harness.dp.record import local_record
    from syncledger import SyncLedger, emulated_device
    from tests.support.dp_fakes import one_rank_group

    with one_rank_group() as group, emulated_device() as dev:
        exchange = MLPSyncExchange(EXCHANGE_BACKENDS[case], group, dev, 1)
        with SyncLedger() as ledger:
            exchange.all_gather_may_d2h(local_record(ForwardMode.DECODE, 8, 8, True))
    return ledger.events


@cache
def _dp_batch_events() -> dict[str, list]:
    """One rank's forward batches carrying what the ranks exchanged, by forward mode: a decode
    step, a prefill step, an IDLE batch."""
    from harness.batch.info import DPGlobalInfo
    from harness.serving.section import ServingConfig
    from harness.serving.world import WorldConfig, build_world
    from syncledger import SyncLedger, emulated_device

    serving = ServingConfig(serving_mode="nonspec", cuda_graph=False, prefill_every=2)
    out = {}
    with emulated_device() as dev:
        world = build_world(WorldConfig(serving, "after", "auto", 2, seed=0), dev)
        world.warmup_and_capture()
        info = DPGlobalInfo((2, 3), False, True, (2, 1))
        for _ in range(2):  # a decode step, then a prefill step
            with world.stepping(), SyncLedger() as ledger:
                plan = world.plan_step()
                world.run_plan(plan, info)
            out["EXTEND" if plan.kind == "prefill" else "DECODE"] = ledger.events
        with world.stepping(), SyncLedger() as ledger:
            world.run_idle(DPGlobalInfo((0, 3), False, False))
        out["IDLE"] = ledger.events
    return out


PROBES: dict[str, Callable[[str], list]] = {
    "dp_exchange": _probe_dp_exchange,
    "dp_batch": lambda case: _dp_batch_events()[case],
}


@pytest.mark.filterwarnings("ignore:.*all_gather_into_tensor.* is deprecated:FutureWarning")
@pytest.mark.parametrize(
    "row", [r for r in TABLE.rows if r.reach and r.reach.probe], ids=lambda r: r.id
)
def test_probe_row_is_reproduced(row) -> None:
    (anchor,) = ANCHORS[row.id]
    for case, want in row.reach.expect.items():
        events = PROBES[row.reach.probe](case)
        seen = [
            e
            for e in events
            if any(str(f).endswith(anchor[0]) and n == anchor[1] for f, n, _ in e.stack)
        ]
        if want == "none":
            assert seen == [], (row.id, case, seen[:2])
        else:
            assert seen, f"{row.id}: {case} makes no sync through {anchor}"
            assert {e.kind.value for e in seen} == {want}, (row.id, case)


def _row_run(row) -> tuple[LoadedScenario, Cells]:
    """The run a row names. One that only picks cells of its committed scenario is read from
    that scenario's own count pass (the gate's: 16 measured steps), those cells only; any other
    override makes a run of its own, of 4 measured steps."""
    committed = load_scenario(row.reach.scenario)
    cells: Cells = {}
    for key, value in map(parse_override, row.reach.overrides):
        values = set(value) if isinstance(value, list) else {value}
        listed = getattr(serving_of(committed.scenario), key.split(".")[-1], ())
        if key not in CELL_PICKS or not values <= set(listed):
            return load_scenario(row.reach.scenario, ["steps.count=4", *row.reach.overrides]), {}
        cells[CELL_PICKS[key]] = values
    return committed, cells


@pytest.mark.slow
@pytest.mark.parametrize("row", [r for r in TABLE.rows if r.unreachable], ids=lambda r: r.id)
def test_unreachable_rows_stay_unreached(row, count_passes) -> None:
    """No committed scenario (nor any row's run, nor any what-if) goes through an unreachable
    row's line."""
    if row.id not in ANCHORS:
        return
    (anchor,) = ANCHORS[row.id]
    runs = [_row_run(r)[0] for r in TABLE.rows if r.reach and r.reach.scenario]
    runs += [_mirror_run(name, mirror) for name, mirror in EXPECTED]
    for loaded in runs:
        rows = count_passes(loaded)
        where = (loaded.name, loaded.overrides)
        assert all(_through(rows, v, anchor) == [] for v in variant_names()), (row.id, where)


# ---- expected syncs per measured step --------------------------------------------------------
# (scenario, mirror) -> variant -> (syncs per decode step, per prefill step), an exception, or a
# dict by batch size; None = no such step in the scenario. Each is read from the scenario's own
# count pass (the gate's: 16 measured steps, a prefill step every 8th); a mirror setting the
# scenario does not list, from the same scenario with that mirror set. Every step of a serving
# scenario waits once for its results (R01: READBACK of the totals); the direct mode has no
# scheduler, so none.
READBACK = 1
EXPECTED = {
    ("nonspec", "auto"): {v: (0 + READBACK, 1 + READBACK) for v in variant_names()},
    ("eagle", "auto"): {v: (1 + READBACK, 3 + READBACK) for v in variant_names()},
    ("specv2_mirror", "auto"): {
        "before": (1 + READBACK, 2 + READBACK),
        "after": (1 + READBACK, 2 + READBACK),
        "dropped": (0 + READBACK, 2 + READBACK),
    },
    ("specv2_mirror", "absent"): {
        "before": "AssertionError",
        "after": "AttributeError",
        "dropped": (0 + READBACK, 2 + READBACK),
    },
    ("specv2_mirror", "present"): {
        v: (1 + READBACK, 2 + READBACK) for v in ("before", "after", "dropped")
    },
    ("direct_no_mirror", "absent"): {
        "before": "AssertionError",
        # eager builds read max_seq_len (F01) and the eager draft extend its length list (F02):
        # graph replay (bs 4) leaves the draft extend's 2; eager (bs 48) adds 2 draft steps
        # and the verify
        "after": {4: (2, None), 48: (5, None)},
        "dropped": (0, None),
    },
}


def _mirror_run(name: str, mirror: str):
    loaded = load_scenario(name)
    if mirror in serving_of(loaded.scenario).mirror:
        return loaded
    return load_scenario(name, [f"serving.mirror={mirror}"])


def per_step_syncs(rows: PassRows, mirror: str) -> dict[tuple, dict[str, set[int]]]:
    """(variant, batch size) -> step kind -> the set of sync totals its measured steps make."""
    steps: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(lambda: [0, "decode"]))
    for c in _records(rows, "counts", {"mirror": {mirror}}):
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


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0]} mirror={k[1]}")
def test_expected_syncs_per_measured_step(key, count_passes) -> None:
    name, mirror = key
    rows = count_passes(_mirror_run(name, mirror))
    got = per_step_syncs(rows, mirror)
    outcomes = _records(rows, "outcomes", {"mirror": {mirror}})
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


def test_serving_scenarios_report_no_stale_mirror(count_passes) -> None:
    for name in ("nonspec", "eagle", "specv2_mirror"):
        assert _records(count_passes(load_scenario(name)), "findings") == [], name
