"""A Triton kernel as a user writes one (with a `@triton.jit` helper), for the real-programs
suite: imported only by the program that launches it, where Triton is installed."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _affine(x, scale):
    return x * scale + 1.0


@triton.jit
def _scaled_prefix_kernel(src, dst, lengths, scale, NSEQ: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.sum(tl.load(lengths + tl.arange(0, NSEQ)))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    tl.store(dst + offs, _affine(tl.load(src + offs, mask=keep), scale), mask=keep)


def _grid(meta: dict) -> tuple[int]:
    # sized from the device: the launch reads the token count on the host
    return (triton.cdiv(int(meta["lengths"].sum()), meta["BLOCK"]),)


def scaled_prefix(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """`values[:sum(lengths)] * 0.5 + 1`, zeros after (`lengths` holds a power-of-two count)."""
    out = torch.zeros_like(values)
    _scaled_prefix_kernel[_grid](values, out, lengths, 0.5, NSEQ=lengths.numel(), BLOCK=16)
    return out
