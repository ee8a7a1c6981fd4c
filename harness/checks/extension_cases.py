"""Planted syncs inside a C++ extension, for the GPU check: what neither the Python interceptors
nor PyTorch's sync debug mode can see, and the CUPTI detector must.

A tiny extension built with `torch.utils.cpp_extension.load_inline` (nvcc and ninja are needed,
so only on a GPU machine) synchronizes in C++: a raw `cudaStreamSynchronize`, a blocking
`cudaMemcpy` into a host variable, and an `.item()` made by ATen inside the extension. The
torchvision NMS op is one more case where torchvision is installed. Each case is a catalogue
`Case`, timed behind a sleeping GPU like the others.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from typing import Any

import torch

from syncledger.catalogue import Case
from syncledger.events import SyncKind

_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>

void stream_sync() { cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream()); }

int64_t blocking_read(torch::Tensor t) {
  int64_t v = 0;
  cudaMemcpy(&v, t.data_ptr<int64_t>(), sizeof(int64_t), cudaMemcpyDeviceToHost);
  return v;
}

int64_t aten_read(torch::Tensor t) { return t.sum().item<int64_t>(); }
"""


@cache
def extension() -> Any:
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        "harness_sync_planted_ext",
        cpp_sources=_SOURCE,
        functions=["stream_sync", "blocking_read", "aten_read"],
        with_cuda=True,
        extra_ldflags=["-lcudart"],
    )


def _nms(inputs: dict[str, torch.Tensor], dev: torch.device) -> object:
    from torchvision.ops import nms

    # boxes made on the device: copying them there would be syncs of its own
    corner = torch.arange(3, device=dev, dtype=torch.float32) * 25
    boxes = torch.stack([corner, corner, corner + 10, corner + 10], dim=1)
    return nms(boxes, 1 - corner / 100, 0.5)


def cases() -> list[Case]:
    """The extension cases (built on first use), and NMS where torchvision is installed."""
    ext = extension()
    D2H, EXPLICIT = SyncKind.D2H_READ, SyncKind.EXPLICIT
    out = [
        Case("ext_cudaStreamSynchronize", lambda t, dev: ext.stream_sync(), {EXPLICIT: 1}, False),
        Case("ext_blocking_cudaMemcpy", lambda t, dev: ext.blocking_read(t["d"]), {D2H: 1}, False),
        Case("ext_aten_item", lambda t, dev: ext.aten_read(t["d"]), {D2H: 1}, False),
    ]
    if importlib.util.find_spec("torchvision") is not None:
        # on the H200 the op copies its mask to the host, then synchronizes the stream: a read
        out.append(Case("torchvision_nms", _nms, {D2H: 1}))
    return out
