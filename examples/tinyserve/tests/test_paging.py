"""Plain tests of the page tables and offsets; the snapshot file gates their syncs."""

import torch
from tinyserve.paging import cu_seqlens, page_table, pages_needed


def test_pages_needed(seq_lens):
    assert pages_needed(seq_lens).tolist() == [1, 3, 2]


def test_page_table(seq_lens, device):
    free = torch.arange(100, 110, device=device)
    table = page_table(seq_lens, free)
    assert table.tolist() == [[100, -1, -1], [101, 102, 103], [104, 105, -1]]


def test_cu_seqlens(seq_lens):
    offsets = cu_seqlens(seq_lens)
    assert offsets.shape == (4,)
