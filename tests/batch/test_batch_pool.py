"""The pool's device tables say what its host lists say, and filling them never syncs.

Random reserves, SWA evictions and frees on small pages (4 and 2 positions, rows not a whole
number of pages), so that runs of consecutive pages form, merge and break often: after each,
every reserved position of every live request holds its page's slot in ``req_to_token``, and
every slot of every SWA block it still holds maps to its SWA page's slot in ``full_to_swa``.
"""

from __future__ import annotations

import random

import pytest

from harness.batch.pool import PoolConfig, ReqToTokenPool
from syncledger import SyncLedger, emulated_device, host_values


def _check_tables(pool: ReqToTokenPool, reserved: dict[int, int]) -> None:
    r2t = host_values(pool.req_to_token).tolist()
    f2s = host_values(pool.full_to_swa).tolist()
    sps = pool.swa_page_size
    for idx, length in reserved.items():
        assert r2t[idx][:length] == pool.slots(idx, 0, length), (idx, length)
        for sblock, spage in pool._reqs[idx].swa_pages.items():
            for o in range(sps):
                assert f2s[pool.slot(idx, sblock * sps + o)] == spage * sps + o, (idx, sblock, o)


@pytest.mark.parametrize("seed", range(4))
def test_tables_follow_the_host_lists_and_filling_them_never_syncs(seed: int) -> None:
    rng = random.Random(seed)
    cfg = PoolConfig(max_reqs=4, context_len=37, draft_slots=2, page_size=4, swa_page_size=2)
    reserved: dict[int, int] = {}
    translated = False
    per_full = cfg.page_size // cfg.swa_page_size
    with emulated_device() as dev, SyncLedger() as led:
        pool = ReqToTokenPool(cfg, dev)
        for _ in range(120):
            act = rng.random()
            if act < 0.25 and len(reserved) < cfg.max_reqs:
                reserved[pool.alloc_req()] = 0
            elif act < 0.75 and reserved:
                idx = rng.choice(sorted(reserved))
                reserved[idx] = min(pool.width, reserved[idx] + rng.randint(0, 13))
                pool.reserve(idx, reserved[idx])
            elif act < 0.9 and reserved:
                idx = rng.choice(sorted(reserved))
                pool.evict_swa(idx, reserved[idx], window=6)
            elif reserved:
                idx = rng.choice(sorted(reserved))
                del reserved[idx]
                pool.free_req(idx)
            assert led.events == []
            _check_tables(pool, reserved)
            translated |= any(
                spage != req.pages[sblock // per_full] * per_full + sblock % per_full
                for req in pool._reqs.values()
                for sblock, spage in req.swa_pages.items()
            )
    assert translated, "every SWA page equalled its full position: the translation is untested"
