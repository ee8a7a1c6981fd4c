"""What `torch.cuda.is_available()` and friends answer while the emulated device claims `"cuda"`.

Code that asks before it runs (torch.amp's autocast and GradScaler, transformers, torch.random's
`fork_rng`) must find a CUDA device, or it turns itself off and the emulated run stops being the
CUDA run it stands for. The emulated device is one device, index 0, that reports an H200's
compute capability (the physics its rules were measured on) and the host's memory. Its random
numbers come from the host's generator, so `torch.cuda`'s RNG state is the host's state.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import torch

from syncledger.emulated import cache

NAME = "emulated device (CPU; rules measured on an NVIDIA H200)"
CAPABILITY = (9, 0)


def _host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory, which holds the emulated device's values."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = os.sysconf("SC_PHYS_PAGES") * page
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * page
    except (ValueError, OSError):
        available = total
    return available, total


@dataclass(frozen=True)
class EmuDeviceProperties:
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int = os.cpu_count() or 1
    is_integrated: bool = False
    is_multi_gpu_board: bool = False


class device(contextlib.AbstractContextManager):
    """`with torch.cuda.device(i):` on the one emulated device: nothing to switch."""

    def __init__(self, device: Any) -> None:
        self.idx = 0

    def __exit__(self, *exc: object) -> None:
        return None


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device: Any) -> None:
    return None


def get_device_name(device: Any = None) -> str:
    return NAME


def get_device_capability(device: Any = None) -> tuple[int, int]:
    return CAPABILITY


def get_device_properties(device: Any = None) -> EmuDeviceProperties:
    return EmuDeviceProperties(NAME, *CAPABILITY, total_memory=_host_memory()[1])


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def is_initialized() -> bool:
    return True


def init() -> None:
    return None


def memory_allocated(device: Any = None) -> int:
    return cache.allocated_bytes()


def memory_reserved(device: Any = None) -> int:
    return cache.reserved_bytes()


def max_memory_allocated(device: Any = None) -> int:
    return cache.peak_bytes()


def reset_peak_memory_stats(device: Any = None) -> None:
    cache.reset_peak()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    return _host_memory()


def get_rng_state(device: Any = "cuda") -> torch.Tensor:
    return torch.get_rng_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "cuda") -> None:
    torch.set_rng_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [torch.get_rng_state()]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    torch.set_rng_state(new_states[0])


def manual_seed(seed: int) -> None:
    return None  # torch.manual_seed seeds the host generator, which the device's ops use


def initial_seed() -> int:
    return torch.initial_seed()


_HostGenerator = torch._C.Generator


class _GeneratorType(type(_HostGenerator)):  # type: ignore[misc]
    # every generator is a `torch.Generator` while this class stands in for it
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _HostGenerator)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _HostGenerator)


class Generator(_HostGenerator, metaclass=_GeneratorType):
    """`torch.Generator`: one for `"cuda"` is a host generator (the device's random numbers are
    the host's) that reports `cuda:0`."""

    def __new__(cls, device: Any = None) -> Generator:
        return super().__new__(cls)  # a host generator, whatever device was asked for

    def __init__(self, device: Any = None) -> None:
        self._on_device = device is not None and torch.device(device).type in ("cuda", "meta")

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 0) if self._on_device else torch.device("cpu")


QUERIES: dict[str, Any] = {
    "is_available": is_available,
    "device_count": device_count,
    "current_device": current_device,
    "set_device": set_device,
    "device": device,
    "get_device_name": get_device_name,
    "get_device_capability": get_device_capability,
    "get_device_properties": get_device_properties,
    "is_bf16_supported": is_bf16_supported,
    "is_initialized": is_initialized,
    "init": init,
    "_lazy_init": init,
    "memory_allocated": memory_allocated,
    "memory_reserved": memory_reserved,
    "max_memory_allocated": max_memory_allocated,
    "reset_peak_memory_stats": reset_peak_memory_stats,
    "mem_get_info": mem_get_info,
    "get_rng_state": get_rng_state,
    "set_rng_state": set_rng_state,
    "get_rng_state_all": get_rng_state_all,
    "set_rng_state_all": set_rng_state_all,
    "manual_seed": manual_seed,
    "manual_seed_all": manual_seed,
    "initial_seed": initial_seed,
}


def current_accelerator(check_available: bool = False) -> torch.device:
    return torch.device("cuda")


ACCELERATOR: dict[str, Any] = {
    "is_available": is_available,
    "device_count": device_count,
    "current_device_index": current_device,
    "current_device_idx": current_device,
    "set_device_index": set_device,
    "set_device_idx": set_device,
    "device_index": device,
    "current_accelerator": current_accelerator,
    "get_device_capability": lambda device=None: {"major": CAPABILITY[0], "minor": CAPABILITY[1]},
}
