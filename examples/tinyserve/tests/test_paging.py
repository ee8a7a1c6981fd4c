import pytest
import torch
from tinyserve.paging import cu_seqlens, page_table, pages_needed


@pytest.fixture
def seq_lens() -> torch.Tensor:
    return torch.tensor([5, 40, 17], device="cuda")


def test_pages_needed(seq_lens):
    assert pages_needed(seq_lens).tolist() == [1, 3, 2]


def test_page_table(seq_lens):
    free = torch.arange(100, 110, device="cuda")
    table = page_table(seq_lens, free)
    assert table.tolist() == [[100, -1, -1], [101, 102, 103], [104, 105, -1]]


def test_cu_seqlens(seq_lens):
    offsets = cu_seqlens(seq_lens)
    assert offsets.shape == (4,)


@pytest.mark.parametrize("batch", [1, 8])
def test_cu_seqlens_is_sync_free(batch):
    cu_seqlens(torch.full((batch,), 7, device="cuda"))
