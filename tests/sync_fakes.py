"""Stand-ins for CUDA tensors, for testing the CUDA interceptors on a machine without CUDA."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class StubTensor:
    """What the interceptors look at on a tensor."""

    is_cuda: bool
    nbytes: int = 64
    pinned: bool = False
    contiguous: bool = True
    shape: tuple[int, ...] = (8,)
    calls: list = field(default_factory=list)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda" if self.is_cuda else "cpu")

    def is_pinned(self) -> bool:
        return self.pinned

    def is_contiguous(self) -> bool:
        return self.contiguous
