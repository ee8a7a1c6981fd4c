"""Scheduler: seeded determinism, accept-length distributions, batch evolution."""

from __future__ import annotations

import random
import statistics

import pytest
import torch

from harness.batch.info import SpecInfo
from harness.batch.pool import PoolConfig, ReqToTokenPool
from harness.serving.accept import ACCEPT_DISTS, AcceptConfig
from harness.serving.scheduler import PADDING_REQ, Scheduler, SchedulerConfig

CPU = torch.device("cpu")


def _scheduler(seed: int = 0, spec: bool = True, **kw) -> Scheduler:
    cfg = SchedulerConfig(
        batch_size=kw.pop("batch_size", 6),
        context_len=kw.pop("context_len", 1024),
        seed=seed,
        spec=SpecInfo() if spec else None,
        **kw,
    )
    pool = ReqToTokenPool(PoolConfig(max_reqs=cfg.batch_size + 1, context_len=1024), CPU)
    return Scheduler(cfg, pool)


def _run(s: Scheduler, n: int) -> list:
    plans = []
    for _ in range(n):
        kind, size = s.peek()
        plan = s.schedule()
        assert (plan.kind, plan.batch_size) == (kind, size)
        s.commit(plan)
        plans.append(plan)
    return plans


@pytest.mark.parametrize("spec", [False, True])
def test_same_seed_same_run(spec: bool) -> None:
    a = _run(_scheduler(7, spec, prefill_every=5), 120)
    b = _run(_scheduler(7, spec, prefill_every=5), 120)
    assert a == b
    c = _run(_scheduler(8, spec, prefill_every=5), 120)
    assert a != c


@pytest.mark.parametrize("dist", sorted(ACCEPT_DISTS))
def test_accept_length_mean_and_range(dist: str) -> None:
    draw = AcceptConfig(mean=2.8, dist=dist).sampler(4)
    xs = draw(random.Random(0), 40_000)
    assert min(xs) >= 1 and max(xs) <= 4
    assert statistics.fmean(xs) == pytest.approx(2.8, abs=0.03)


def test_accept_mean_out_of_range_rejected() -> None:
    with pytest.raises(ValueError):
        AcceptConfig(mean=4.5).sampler(4)
    with pytest.raises(ValueError):
        AcceptConfig(dist="nope").sampler(4)


def test_scheduler_accept_lengths_follow_config() -> None:
    plans = _run(_scheduler(3, True, accept=AcceptConfig(mean=2.8)), 300)
    acc = [a for p in plans if p.kind == "decode" for a in p.accept_lens]
    assert statistics.fmean(acc) == pytest.approx(2.8, abs=0.1)


def test_decode_advances_by_one_or_accept() -> None:
    for spec in (False, True):
        s = _scheduler(1, spec)
        plan = s.schedule()
        before = dict(zip(plan.pool_indices, plan.seq_lens))
        s.commit(plan)
        step = plan.accept_lens or (1,) * plan.batch_size
        for idx, adv in zip(plan.pool_indices, step):
            if idx in s.lengths():
                assert s.lengths()[idx] == before[idx] + adv


def test_prefill_rate_and_composition_changes() -> None:
    s = _scheduler(5, True, prefill_every=4, output_len=(8, 40))
    plans = _run(s, 80)
    kinds = [p.kind for p in plans]
    assert [i for i, k in enumerate(kinds) if k == "prefill"] == list(range(3, 80, 4))
    assert s.finished_total > 5
    decode_sets = {frozenset(p.pool_indices) for p in plans if p.kind == "decode"}
    assert len(decode_sets) > 3  # requests left and new ones arrived
    for p in plans:
        assert PADDING_REQ not in p.pool_indices
        assert p.batch_size <= 6
        for item in p.prefill:
            assert 0 <= item.prefix_len < item.seq_len <= 256
        for n in p.seq_lens:
            assert 1 <= n <= 1024 - 4


def test_direct_admission_keeps_batch_size() -> None:
    s = _scheduler(2, False, prefill_every=0, output_len=(4, 12))
    plans = _run(s, 60)
    assert all(p.kind == "decode" and p.batch_size == 6 for p in plans)
    assert any(p.admitted_direct for p in plans)
