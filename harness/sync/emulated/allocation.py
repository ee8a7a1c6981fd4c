"""Device memory made where PyTorch allocates it: the backend kernels of `empty` and
`empty_strided`, while the emulated device is active.

A factory with no tensor argument never reaches a tensor's door: PyTorch's own composites make
their temporaries from an input's options (SDPA's causal mask is `ones(..., query.options())`),
and those options name the input's C++ device, `meta`. So while the emulated device is active,
the Meta kernels of the two allocation ops (every other factory is built on them) make emulated
tensors with real CPU values; on a CPU-only build, where the emulated device claims `"cuda"`,
so do the CUDA kernels (nested Python code that says `device=t.device` asks for `cuda:0`).
"""

from __future__ import annotations

from typing import Any

import torch

from harness.sync.emulated.tensor import EmuTensor

_CPU = torch.device("cpu")
_lib: torch.library.Library | None = None
_keys: set[str] = set()


def _empty(
    size: Any,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    return EmuTensor(
        torch.empty(size, dtype=dtype, layout=layout, device=_CPU, memory_format=memory_format)
    )


def _empty_strided(
    size: Any,
    stride: Any,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return EmuTensor(torch.empty_strided(size, stride, dtype=dtype, layout=layout, device=_CPU))


def install(cuda_too: bool) -> None:
    """Route the Meta (and with `cuda_too` the CUDA) allocation kernels to the emulated device,
    until `uninstall`."""
    global _lib
    if _lib is None:
        _lib = torch.library.Library("aten", "IMPL")
    for key in ("Meta", "CUDA") if cuda_too else ("Meta",):
        if key not in _keys:
            _lib.impl("empty.memory_format", _empty, key)
            _lib.impl("empty_strided", _empty_strided, key)
            _keys.add(key)


def uninstall() -> None:
    global _lib
    if _lib is not None:
        _lib._destroy()
        _lib = None
        _keys.clear()
