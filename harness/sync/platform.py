"""Whether this process has a real CUDA device, looked up once at import: while the emulated
device claims `"cuda"`, `torch.cuda.is_available()` answers for it instead."""

from __future__ import annotations

import torch

CUDA_PRESENT: bool = torch.cuda.is_available()
