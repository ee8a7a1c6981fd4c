"""Page tables and sequence offsets for a batch: what an attention kernel reads each step."""

from __future__ import annotations

import torch

from syncledger import region

PAGE = 16


def pages_needed(seq_lens: torch.Tensor) -> torch.Tensor:
    """Pages per sequence, computed on the device."""
    return (seq_lens + PAGE - 1) // PAGE


def page_table(seq_lens: torch.Tensor, free_pages: torch.Tensor) -> torch.Tensor:
    """One row of page ids per sequence, padded with -1. The table is as wide as the longest
    sequence's page count, a shape that comes from the data: reading it is a sync."""
    with region("page_table"):
        counts = pages_needed(seq_lens)
        width = int(counts.max())
        starts = torch.cumsum(counts, 0) - counts
        cols = torch.arange(width, device=seq_lens.device)
        idx = (starts[:, None] + cols[None, :]).clamp(max=free_pages.numel() - 1)
        valid = cols[None, :] < counts[:, None]
        return torch.where(valid, free_pages[idx], -1)


def cu_seqlens(seq_lens: torch.Tensor) -> torch.Tensor:
    """Cumulative sequence lengths with a leading 0, without leaving the device."""
    with region("cu_seqlens"):
        return torch.nn.functional.pad(torch.cumsum(seq_lens, 0), (1, 0))
