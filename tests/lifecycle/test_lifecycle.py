"""The request lifecycle: requests arrive, decode and finish, their KV freed as upstream frees
it; SWA sweeps on the interval; the summary's steady and occasional sites; the lifecycle keys."""

from __future__ import annotations

import pytest

from harness.batch.pool import PoolConfig, ReqToTokenPool
from harness.cli import main
from harness.fidelity import anchors
from harness.lifecycle.rates import HAZARD_KINDS, rate_differences, site_rates
from harness.lifecycle.scheduler import LifecycleScheduler
from harness.lifecycle.section import LifecycleConfig
from harness.results.tables import PASS_COLUMNS
from harness.scenario import load_scenario
from harness.serving.accept import AcceptConfig
from syncledger import SyncKind, SyncLedger, emulated_device

ANCHORS = anchors()


def _line(row: str) -> str:
    ((path, line),) = ANCHORS[row]
    return f"{path}:{line}"


def _scheduler(dev, interval: int = 128, **keys) -> LifecycleScheduler:
    cfg = LifecycleConfig(eviction_interval=interval, **keys)
    pool = ReqToTokenPool(PoolConfig(max_reqs=9, context_len=2048), dev)
    return LifecycleScheduler(
        cfg, max_running=8, context_len=2048, spec=None, accept=AcceptConfig(), seed=3, pool=pool
    )


def _run(sched: LifecycleScheduler, steps: int) -> list[tuple[int, str, int, list]]:
    """(forward count, kind, batch size, the events of planning it) per iteration."""
    out = []
    for _ in range(steps):
        ct = sched.forward_ct
        with SyncLedger() as ledger:
            plan = sched.schedule()
        out.append((ct, plan.kind, plan.batch_size, ledger.events))
        sched.commit(plan)
    return out


def test_requests_arrive_and_finish_and_the_batch_changes():
    with emulated_device() as dev:
        sched = _scheduler(dev, arrival_rate=0.5, output_len=[4, 24], initial_running=4)
        free_at_start = len(sched.pool._free_pages)
        held_at_start = sum(len(r.pages) for r in sched.pool._reqs.values())
        steps = _run(sched, 60)
    sizes = {bs for _, kind, bs, _ in steps if kind == "decode"}
    assert len(sizes) > 3 and max(sizes) <= 8, sizes
    assert sched.finished_total > 10 and any(kind == "prefill" for _, kind, _, _ in steps)
    held = sum(len(r.pages) for r in sched.pool._reqs.values())
    # every page a finished request held went back to the host list: none leaked
    assert len(sched.pool._free_pages) + held == free_at_start + held_at_start


def test_swa_sweeps_only_on_decode_steps_of_the_interval():
    with emulated_device() as dev:
        sched = _scheduler(dev, interval=16, arrival_rate=0.2, initial_running=8)
        steps = _run(sched, 80)
    swept = [(ct, kind) for ct, kind, _, events in steps if events]
    assert swept, "no sweep freed anything"
    assert all(ct % 16 == 0 and kind == "decode" for ct, kind in swept), swept
    ops = {(e.op, e.location) for _, _, _, events in steps for e in events}
    assert ops == {
        ("unique", _line("L02")),
        ("getitem", _line("L03")),
        ("unique", _line("L01")),
        ("setitem", _line("L04")),
    }


@pytest.mark.parametrize(("committed", "allocated", "frees"), [(500, 500, 1), (510, 514, 2)])
def test_a_finished_request_frees_its_kv_as_upstream(committed, allocated, frees):
    """Its committed slots; with speculative decoding also those allocated past them from the
    next page on. Each free: the full pool's unique, then free_swa's unique, mask, the SWA
    pool's unique and the mapping cleared."""
    with emulated_device() as dev:
        pool = ReqToTokenPool(PoolConfig(max_reqs=2, context_len=2048), dev)
        idx = pool.alloc_req()
        pool.reserve(idx, allocated)
        pages = list(pool._reqs[idx].pages)
        with SyncLedger() as ledger:
            pool.release_kv(idx, committed, allocated)
        mapping = pool.full_to_swa.clone()
    one = ["L01", "L02", "L03", "L01", "L04"]
    assert [e.location for e in ledger.events] == [_line(r) for r in one * frees]
    assert {e.kind for e in ledger.events} == {SyncKind.D2H_READ, SyncKind.H2D_BLOCKING}
    assert sorted(set(pool.full_free.released.tolist())) == pages
    for page in pages:
        assert int(mapping[page * 256 : (page + 1) * 256].abs().sum()) == 0


def _tables(rows):
    import pandas as pd

    return (
        pd.DataFrame(rows.counts, columns=PASS_COLUMNS["counts"]),
        pd.DataFrame(rows.syncs, columns=PASS_COLUMNS["syncs"]),
    )


def test_site_rates_put_the_lifecycle_frees_apart_from_the_steady_syncs(count_passes):
    counts, syncs = _tables(count_passes(load_scenario("lifecycle_specv2")))
    rates = site_rates(counts, syncs)
    pool_lines = {_line(r) for r in ("L01", "L02", "L03", "L04")}
    occasional = rates[rates["footing"] == "occasional"]
    steady = rates[rates["footing"] == "steady"]
    assert set(occasional["location"]) == pool_lines
    assert not pool_lines & set(steady["location"])
    # the relay's synchronize is in every decode step of `after`, in none of `dropped`
    relay = steady[steady["op"] == "Stream.synchronize"]
    assert set(relay["variant"]) == {"after"} and set(relay["per_step"]) == {1.0}
    measured = counts[counts["path"].isin(["graph", "eager"])].groupby("variant")["step"].nunique()
    for _, r in occasional.iterrows():
        assert r["steps"] == measured[r["variant"]]
        assert r["per_1000_steps"] == pytest.approx(r["syncs"] / r["steps"] * 1000)
    assert rate_differences(rates, rates).empty
    changed = rates.copy()
    changed.loc[occasional.index[0], "syncs"] += 1
    assert len(rate_differences(changed, rates)) == 1
    assert len(rate_differences(rates.drop(index=steady.index[0]), rates)) == 1


def test_the_rates_leave_out_the_hazards_the_ledger_does_not_count():
    assert set(HAZARD_KINDS) == {k.value for k in SyncKind if not k.is_sync}


@pytest.mark.parametrize(
    ("override", "expect"),
    [
        (("serving.serving_mode=direct", "serving.mirror=[present]"), "direct has no scheduler"),
        ("serving.prefill_every=8", "serving.prefill_every: 0 with lifecycle"),
        ("lifecycle.prompt_len=[900, 100]", "lifecycle.prompt_len: [900, 100] must be"),
        ("lifecycle.arrival_rate=0", "lifecycle.arrival_rate"),
        ("lifecycle.max_prefill_tokens=512", "lifecycle.max_prefill_tokens: below the longest"),
    ],
)
def test_bad_lifecycle_keys_are_exit_2(override, expect, capsys, tmp_path):
    sets = [
        a for o in ([override] if isinstance(override, str) else override) for a in ("--set", o)
    ]
    assert main(["bench", "--scenario", "lifecycle", *sets, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert expect in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_long_runs_cross_several_sweeps():
    for name in ("sweeps/lifecycle_long", "sweeps/lifecycle_specv2_long"):
        loaded = load_scenario(name)
        sweeps = (
            loaded.scenario.steps.count // loaded.scenario.section("lifecycle").eviction_interval
        )
        assert sweeps >= 4, name


@pytest.mark.parametrize(
    ("change", "rc"), [(None, 0), ("one more sync", 1), ("a failed cell", 1)], ids=str
)
def test_the_gpu_check_passes_only_when_every_site_and_cell_agree(
    change, rc, count_passes, monkeypatch, tmp_path, capsys
):
    import harness.checks.lifecycle_gpu as check
    from harness.cli import main

    counts, syncs = _tables(count_passes(load_scenario("lifecycle")))
    rates = site_rates(counts, syncs)

    def run_rates(name, device, out):
        mine = rates.copy()
        failed = []
        if device == "cuda" and change == "one more sync":
            mine.loc[mine.index[0], "syncs"] += 1
        if device == "cuda" and change == "a failed cell":
            failed = ["after/bs=8: RuntimeError boom"]
        return tmp_path / device, mine, failed

    monkeypatch.setattr("syncledger.platform.cuda_present", lambda: True)
    monkeypatch.setattr(check, "run_rates", run_rates)
    assert main(["check", "lifecycle", "--scenario", "lifecycle", "--out", str(tmp_path)]) == rc
    assert ("PASS" if rc == 0 else "FAIL") in capsys.readouterr().out
    assert (tmp_path / "lifecycle_rates.csv").exists()
