"""A sync planted into a backend variant is caught at its line on the emulated device, so it
cannot pass `make test` unseen: allclose, a debug f-string, masked_select, t[mask] = scalar."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
import torch

from harness.backend import BackendConfig, DeepseekV4AttnBackend, variants
from harness.batch.info import ForwardMode
from harness.checks.backend_cases import CaseSpec, build_pool, make_case_batch, reserve_for
from syncledger import SyncKind, SyncLedger, emulated_device, region

THIS_FILE = "tests/backend/test_sync_planted_backend.py"


def _mask_assign(seq_lens: torch.Tensor) -> None:
    work = seq_lens.clone()
    work[work > 0] = seq_lens[0]  # a device scalar through a device mask


PLANTS: dict[str, tuple[Callable[[torch.Tensor], object], int]] = {
    "allclose": (lambda s: torch.allclose(s.float(), s.float()), 1),
    "debug_fstring": (lambda s: f"seq_lens={s}", 4),  # three lengths, then the whole
    "masked_select": (lambda s: torch.masked_select(s, s > 0), 1),
    "mask_assign_device_scalar": (_mask_assign, 1),
}


def _decode_step_syncs() -> list:
    """The events of one eager decode metadata build of the `after` variant, mirror present."""
    with emulated_device() as dev:
        case = CaseSpec(ForwardMode.DECODE, (9, 300, 700))
        pool, rows = build_pool(dev, 3, 1000, seed=5)
        reserve_for(pool, rows, case, 5)
        backend = DeepseekV4AttnBackend(BackendConfig(variant="after"), pool, dev)
        batch = make_case_batch(pool, rows, case, dev, mirror=True)
        with SyncLedger() as led, region("step"):
            backend.init_forward_metadata(batch)
    return led.events


@pytest.mark.parametrize("name", PLANTS)
def test_a_planted_sync_is_caught_at_its_line(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [e for e in _decode_step_syncs() if e.is_sync] == []
    plant, reads = PLANTS[name]
    original = variants.AfterPolicy.max_seq_len_may_d2h
    planted_line = inspect.getsourcelines(plant)[1]

    def planted(self, seq_lens, seq_lens_cpu, capture_max):
        plant(seq_lens)
        return original(self, seq_lens, seq_lens_cpu, capture_max)

    monkeypatch.setattr(variants.AfterPolicy, "max_seq_len_may_d2h", planted)
    events = [e for e in _decode_step_syncs() if e.is_sync]
    assert len(events) == reads
    for e in events:
        assert e.kind is SyncKind.D2H_READ
        file, _, line = e.location.rpartition(":")
        assert file.endswith(THIS_FILE)
        assert planted_line <= int(line) <= planted_line + 3, e.describe()
        assert e.region.startswith("step/metadata")
