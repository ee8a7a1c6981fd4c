"""Choosing the device: `auto` is CUDA when a GPU is present, else the emulated device.

torch is imported when a device is chosen, not with the module: the pytest plugin reads
`DEVICE_KINDS` in every run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DEVICE_KINDS = ("auto", "cuda", "emu")


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cuda" or "emu"
    device: torch.device
    name: str  # GPU name, or a description of the emulated device


def check_environment() -> None:
    """The ledger's settings from the environment, read before any work needs them: a bad one
    is exit 3 naming the variable (not a failure inside every copy's classification)."""
    from syncledger.errors import OperationalError
    from syncledger.rules import pageable_staging_bytes

    try:
        pageable_staging_bytes()
    except ValueError as exc:
        raise OperationalError(str(exc)) from None


def resolve_kind(kind: str) -> str:
    from syncledger.platform import cuda_present

    if kind not in DEVICE_KINDS:
        raise ValueError(f"unknown device {kind!r}; expected one of {', '.join(DEVICE_KINDS)}")
    if kind == "auto":
        return "cuda" if cuda_present() else "emu"
    if kind == "cuda" and not cuda_present():
        raise ValueError("cuda was asked for but no CUDA device is available on this machine")
    return kind


@contextmanager
def use_device(kind: str = "auto") -> Iterator[DeviceInfo]:
    """Yield the device to run on; the emulated device is active for the block when chosen, and
    code that says `"cuda"` runs there, also on a machine with a GPU."""
    import torch

    from syncledger.emulated import emulated_device

    resolved = resolve_kind(kind)
    if resolved == "cuda":
        yield DeviceInfo(
            "cuda", torch.device("cuda", torch.cuda.current_device()), torch.cuda.get_device_name()
        )
        return
    with emulated_device() as dev:
        yield DeviceInfo("emu", dev, "emulated device (CPU tensors; host times only)")
