"""Budgets written into the tests: tinyserve's offsets never read the device. `within` counts
only the syncs tinyserve makes, not the tests' own (building inputs, checking results)."""

import pytest
import torch
from tinyserve.paging import cu_seqlens


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.max_syncs(0, within=["tinyserve"])
def test_cu_seqlens_stays_on_the_device(batch, device):
    offsets = cu_seqlens(torch.full((batch,), 7, device=device))
    assert offsets.tolist() == [7 * i for i in range(batch + 1)]


def test_cu_seqlens_with_the_fixture(sync_ledger, seq_lens):
    cu_seqlens(seq_lens)
    assert sync_ledger.count(within="tinyserve") == 0
