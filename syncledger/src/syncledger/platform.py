"""Whether this process has a real CUDA device. Asked the first time it matters, never at
import: asking starts the CUDA driver, and after that no child the program forks can use CUDA.
The answer is kept: while the emulated device claims `"cuda"`, `torch.cuda.is_available()`
answers for it instead."""

from __future__ import annotations

from functools import cache

import torch

_is_available = torch.cuda.is_available  # torch's own, whatever stands in for it later


@cache
def cuda_present() -> bool:
    return _is_available()
