"""DP attention in one process: the record, what the ranks decide from the gathered records,
how a rank's graph runner obeys those decisions, the DP scenario keys, the answer's interval."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
import torch

from harness.batch.info import DPGlobalInfo, ForwardMode
from harness.cli import main
from harness.dp.exchange import read_back_may_d2h
from harness.dp.inject import Injection
from harness.dp.job import check_gpus
from harness.dp.record import FORWARD_MODE_CODE, RECORD_LEN, local_record
from harness.dp.section import dp_of
from harness.dp.summary import EXCHANGE_REGION, format_stall_answer, stall_answer
from harness.errors import InputError
from harness.gate.run import chosen_scenarios
from harness.results.load import RunData
from harness.scenario import load_scenario
from harness.serving.section import ServingConfig
from harness.serving.world import WorldConfig, build_world
from harness.synccost.cases import INJECTIONS
from syncledger import SyncLedger, emulated_device

DECODE, EXTEND, IDLE = (FORWARD_MODE_CODE[m] for m in (ForwardMode.DECODE, ForwardMode.EXTEND,
                                                       ForwardMode.IDLE))  # fmt: skip


def test_local_record_in_upstream_order():
    assert local_record(ForwardMode.DECODE, 8, 8, True).values() == [8, 8, 1, 0, 0, DECODE, 0]
    assert local_record(ForwardMode.EXTEND, 300, 2, True).values() == [300, 2, 0, 1, 0, EXTEND, 1]
    assert local_record(None, 0, 0, True).values() == [0, 0, 1, 0, 0, IDLE, 0]
    assert local_record(ForwardMode.DECODE, 8, 8, False).values()[2] == 0  # graphs disabled
    with pytest.raises(ValueError, match="DECODE or EXTEND"):
        local_record(ForwardMode.TARGET_VERIFY, 8, 8, True)


def _gathered(*records, device=None):
    rows = [r.values() for r in records]
    return torch.tensor(rows, dtype=torch.int64, device=device).view(len(rows), 1, RECORD_LEN)


def test_one_prefilling_rank_decides_for_every_rank():
    decode = local_record(ForwardMode.DECODE, 8, 8, True)
    prefill = local_record(ForwardMode.EXTEND, 120, 1, True)
    idle = local_record(None, 0, 0, True)
    got = read_back_may_d2h(_gathered(decode, prefill, idle))
    assert got.global_num_tokens == (8, 120, 0)
    assert not got.can_cuda_graph and got.is_extend_in_batch  # minimum / maximum over ranks
    assert not got.can_run_breakable_cuda_graph  # not every rank extends
    assert got.need_idle_batch
    steady = read_back_may_d2h(_gathered(decode, decode, idle))
    assert steady.can_cuda_graph and not steady.is_extend_in_batch
    assert steady.global_info() == DPGlobalInfo((8, 8, 0), True, False, (8, 8, 0))
    assert not read_back_may_d2h(_gathered(idle, idle)).need_idle_batch  # nobody has work


def test_read_backs_sync_only_on_device_tensors():
    rec = local_record(ForwardMode.DECODE, 8, 8, True)
    with emulated_device() as dev:
        host, device = _gathered(rec, rec), _gathered(rec, rec, device=dev)
        with SyncLedger() as on_host:
            read_back_may_d2h(host)
        with SyncLedger() as on_device:
            read_back_may_d2h(device)
    assert on_host.events == []
    ops = [(e.kind.value, e.op) for e in on_device.events]
    assert sorted(ops) == sorted([("d2h_read", "cpu")] * 2 + [("d2h_read", "item")] * 3)


# ---- a rank's graph runner under the ranks' decisions ----------------------------------------
@pytest.fixture(scope="module")
def world():
    with emulated_device() as dev:
        serving = ServingConfig(serving_mode="nonspec", cuda_graph_max_bs=16)
        cfg = WorldConfig(serving, "after", "auto", 4, seed=0, capture=(4, 8, 12, 16))
        w = build_world(cfg, dev)
        w.warmup_and_capture()
        yield w


def _decode_pass(world, info: DPGlobalInfo | None):
    with world.stepping():
        plan = world.plan_step()
        (rec, _truth), *_ = world.run_plan(plan, info)
    return rec.forward_mode, rec.path, rec.bucket


@pytest.mark.parametrize(
    ("info", "want"),
    [
        (None, ("DECODE", "graph", 4)),  # alone: its own bucket
        (DPGlobalInfo((4, 11), True, False), ("DECODE", "graph", 12)),  # the max across ranks
        (DPGlobalInfo((4, 11), False, True), ("DECODE", "eager", None)),  # a rank extends
        (DPGlobalInfo((4, 40), True, False), ("DECODE", "eager", None)),  # max above 16
    ],
)
def test_graph_bucket_comes_from_the_largest_batch_across_ranks(world, info, want):
    with emulated_device():
        assert _decode_pass(world, info) == want


@pytest.mark.parametrize(
    ("info", "want"),
    [
        (DPGlobalInfo((0, 7), True, False), ("IDLE", "graph", 8)),
        (DPGlobalInfo((0, 7), False, True), ("IDLE", "eager", None)),
    ],
)
def test_idle_rank_runs_an_idle_batch(world, info, want):
    with emulated_device(), world.stepping():
        ((rec, truth),) = world.run_idle(info)
    assert (rec.forward_mode, rec.path, rec.bucket) == want
    assert rec.batch_size == 0 and list(truth) == []


def test_gpu_count_is_checked_before_any_rank_starts(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(InputError, match="2 ranks on this host need 2 GPUs, found 1"):
        check_gpus(2, "dp.ranks")
    check_gpus(1, "dp.ranks")


# ---- the scenario -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "expect"),
    [
        ("dp.backend=[mpi]", "dp.backend: unknown value 'mpi'"),
        ("dp.inject.rank=2", "dp.inject.rank: rank 2 of 2 ranks"),
        ("dp.inject.kind=itme", "did you mean 'item'"),
        ("dp.streams=[{}, {}, {}]", "dp.streams: 3 streams for 2 ranks"),
        ("dp.streams=[{batch_sze: 4}]", "did you mean 'dp.streams[0].batch_size'"),
        ("dp.streams=[{idle: true, batch_size: 4}]", "dp.streams[0].idle"),
        ("dp.streams=[{idle: true}, {idle: true}]", "every rank is idle"),
        ("dp.timeout_s=0", "dp.timeout_s: 0.0 out of range"),
        ("serving.batch_sizes=[8, 16]", "serving.batch_sizes: one value with dp"),
        ("serving.serving_mode=eagle", "serving_mode nonspec or specv2"),
    ],
)
def test_bad_dp_keys_are_exit_2(override, expect, capsys, tmp_path):
    argv = ["bench", "--scenario", "dp_attention", "--set", override, "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expect in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(
    ("override", "expect"),
    [
        ("dp.streams=[{}, {idle: true}]", "dp.streams: an idle rank with speculative decoding"),
        ("serving.prefill_every=8", "serving.prefill_every: 0 on every rank with speculative"),
        ("dp.streams=[{prefill_every: 4}]", "serving.prefill_every: 0 on every rank"),
    ],
)
def test_dp_with_speculation_only_decodes(override, expect, capsys, tmp_path):
    argv = ["bench", "--scenario", "dp_specv2", "--set", override, "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expect in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_a_dp_scenario_holds_its_section_beside_the_serving_one():
    assert "dp" not in load_scenario("nonspec").effective()
    dp = load_scenario("dp_attention")
    assert dp.scenario.world == "dp" and dp.effective()["dp"]["ranks"] == 2
    assert dp.effective()["serving"]["variants"] == ["after"]


def test_gate_counts_single_rank_scenarios_only(capsys):
    names = [ls.name for ls in chosen_scenarios(None)]
    assert "dp_attention" not in names and "nonspec" in names
    with pytest.raises(InputError, match="the dp world, which the gate does not count"):
        chosen_scenarios(["dp_attention"])


# ---- the answer -------------------------------------------------------------------------------
def _dp_run(shift_us: float) -> RunData:
    """A DP run's tables with rank 1's exchange wait `shift_us` longer with the planted sync."""
    rng = np.random.default_rng(1)
    cells = {
        f"gloo/fwd50us/{kind}": {"backend": "gloo", "forward_us": 50.0, "injected": kind == "inject"}
        for kind in ("base", "inject")
    }  # fmt: skip
    rows = []
    for label, axes in cells.items():
        for rank in (0, 1):
            base = 100.0 + rng.normal(0.0, 5.0, 200)
            extra = shift_us if axes["injected"] and rank == 1 else 0.0
            for step, us in enumerate(base + extra):
                rows.append({"case": label, "rank": rank, "step": step, "path": "graph",
                             "region": EXCHANGE_REGION, "metric": "host", "value_us": us})  # fmt: skip
    empty = pd.DataFrame()
    meta = {"dp": {"cells": cells, "inject": {"rank": 0, "kind": "item", "count": 1,
                                              "region": "step/scheduler/prepare"}}}  # fmt: skip
    return RunData(Path("."), meta, empty, empty, pd.DataFrame(rows), empty, empty, empty)


def test_the_answer_is_the_other_ranks_extra_wait_with_its_interval():
    table = stall_answer(_dp_run(40.0)).set_index("rank")
    other, own = table.loc[1], table.loc[0]
    assert other.low_us < 40.0 < other.high_us and other.low_us > 25.0
    assert own.low_us < 0 < own.high_us  # nothing planted in rank 0's exchange samples
    assert other.steps == 200
    text = format_stall_answer(_dp_run(40.0))
    assert "gloo, forward 50 µs: rank 1 waits +" in text and "rank 0 waits" not in text


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
def test_every_planted_kind_is_counted_as_its_kind(kind):
    with emulated_device() as dev:
        inj = Injection(kind, "step/scheduler/prepare", 2, dev)
        with SyncLedger() as led:
            inj.at("step/scheduler/process_result")  # not its region: nothing
            inj.at("step/scheduler/prepare")
    assert [e.kind.value for e in led.events] == [INJECTIONS[kind]] * 2


# ---- where a step waits for results -----------------------------------------------------------
class _Event:
    made: ClassVar[list[_Event]] = []

    def __init__(self):
        self.waited = False
        _Event.made.append(self)

    def record(self):
        return None

    def synchronize(self):
        self.waited = True


@pytest.mark.parametrize(("backend", "overlap"), [("gloo", True), ("nccl", False)])
def test_overlap_waits_for_the_previous_step_else_for_this_one(world, monkeypatch, backend,
                                                               overlap):  # fmt: skip
    from harness.dp.backends import EXCHANGE_BACKENDS
    from harness.dp.exchange import MLPSyncExchange
    from harness.dp.world import DPWorld

    monkeypatch.setattr(torch.cuda, "Event", _Event)
    _Event.made = []
    exchange = MLPSyncExchange(EXCHANGE_BACKENDS[backend], None, torch.device("cpu"), 2)
    dp = DPWorld(world, exchange)
    assert dp.overlap is overlap
    dp._process_results(launched=True)
    first = _Event.made[0]
    assert first.waited is not overlap  # with overlap nothing came before it
    dp._process_results(launched=True)
    assert first.waited  # step 2 processed step 1 (overlap) or step 1 processed itself
    assert _Event.made[1].waited is not overlap


@pytest.mark.filterwarnings("ignore:.*all_gather_into_tensor.* is deprecated:FutureWarning")
@pytest.mark.parametrize(("skip", "exchanges"), [(False, 2), (True, 1)])
def test_a_speculative_decode_step_exchanges_twice_unless_skipped(skip, exchanges):
    """scheduler.py 2694 (the new prefill batch's record) and 2712 (the decode batch's); over
    NCCL each exchange makes its 8 read-backs."""
    from harness.dp.backends import EXCHANGE_BACKENDS
    from harness.dp.exchange import MLPSyncExchange
    from harness.dp.world import DPWorld
    from tests.support.dp_fakes import one_rank_group

    serving = ServingConfig(serving_mode="specv2", cuda_graph=False)
    with one_rank_group() as group, emulated_device() as dev:
        world = build_world(WorldConfig(serving, "dropped", "auto", 2, seed=0), dev)
        exchange = MLPSyncExchange(EXCHANGE_BACKENDS["nccl"], group, dev, 1)
        dp = DPWorld(world, exchange, skip_spec_sync=skip)
        dp.warmup_and_capture()
        with SyncLedger() as ledger:
            dp.step()
    assert ledger.count(region="step/scheduler/dp_exchange") == 8 * exchanges


# ---- the launcher's SIGTERM -------------------------------------------------------------------
def test_sigterm_stops_a_running_cell_once_then_only_notes(monkeypatch):
    import os
    import signal

    from harness.dp.job import RankStopped, _Sigterm

    previous = signal.getsignal(signal.SIGTERM)
    stop = _Sigterm()
    try:
        stop.install()
        with pytest.raises(RankStopped, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # already stopping: noted, not raised again
        assert stop.received.is_set()
        quiet = _Sigterm()
        quiet.install()
        quiet.raising = False  # gathering and writing: never interrupted
        os.kill(os.getpid(), signal.SIGTERM)
        assert quiet.received.is_set()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_pass_the_launcher_stops_still_has_its_outcome(monkeypatch):
    from harness.dp import job as dpjob
    from harness.results.tables import COLUMNS
    from harness.runner.device import DeviceHandle

    def stopped(sc, cell, dh, builder):  # the SIGTERM came outside the cell's failure handling
        raise dpjob.RankStopped("stopped by SIGTERM")

    monkeypatch.setitem(dpjob.PASSES, "count", stopped)
    loaded = load_scenario("dp_attention")
    job = dpjob.RankJob(loaded, "emu", "count", Path("unused"), "run-id")
    dh = DeviceHandle("emu", torch.device("meta"), "emulated device")
    rows, why = dpjob.run_cells(job, dh, dict.fromkeys(dp_of(loaded.scenario).backend), rank=1)
    assert why.startswith("dp_attention/gloo/fwd50us/base, count pass, rank 1: stopped")
    (outcome,) = (dict(zip(COLUMNS["outcomes"], o)) for o in rows.outcomes)
    assert (outcome["scenario"], outcome["case"], outcome["status"], outcome["exception"]) == (
        "dp_attention",
        "gloo/fwd50us/base",
        "error",
        "RankStopped",
    )
