"""The wait timer (syncledger.wait_timer): with no ledger open, each synchronizing call on the
emulated device appends its site, kind and host time; no other op does. The device claims
"cuda" on a GPU host too, so `torch.cuda.synchronize()` is its own there as well."""

from __future__ import annotations

import torch

from syncledger import SyncLedger, emulated_device, region, set_step, wait_timer
from syncledger.emulated.tensor import EmuTensor


def _sites(samples) -> list[tuple[str, str]]:
    return [(s.site.rsplit("/", 1)[-1].split(":")[0], s.kind) for s in samples]


def test_only_synchronizing_calls_are_timed_with_their_site_and_step():
    with emulated_device(claim_cuda=True) as dev, wait_timer() as waits:
        t = torch.arange(8, device=dev)
        assert isinstance(t, EmuTensor)
        set_step(3)
        with region("step"):
            u = (t * 2 + 1).sum()  # device work: no wait
            v = u.item()  # a read of the device: a wait
            t.cpu()  # a blocking copy to the host: a wait
            torch.cuda.synchronize()  # explicit: a wait
        set_step(None)
    assert v == 64
    this = __file__.rsplit("/", 1)[-1].split(":")[0]
    assert _sites(waits.samples) == [(this, "d2h_read"), (this, "d2h_read"), (this, "explicit")]
    assert {s.step for s in waits.samples} == {3} and {s.region for s in waits.samples} == {"step"}
    assert all(s.wait_ns >= 0 for s in waits.samples)


def test_a_closed_timer_takes_nothing_and_the_ledger_counts_as_before():
    with emulated_device() as dev:
        t = torch.arange(4, device=dev)
        with wait_timer() as waits:
            t.sum().item()
        t.sum().item()
        with SyncLedger() as led:
            t.sum().item()
    assert len(waits.samples) == 1 and led.count() == 1
