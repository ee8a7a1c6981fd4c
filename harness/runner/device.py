"""`--device auto|cuda|emu` for the runner's commands, on top of `syncledger.use_device`:
auto is CUDA when a GPU is present, else the emulated device; a bad choice is exit 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from harness.errors import InputError
from syncledger import DEVICE_KINDS, DeviceInfo, use_device
from syncledger.device import check_environment, resolve_kind

DEVICE_CHOICES = DEVICE_KINDS
DeviceHandle = DeviceInfo  # kind ("cuda" | "emu"), device (for device tensors), name


def device_kind(requested: str) -> str:
    """The device kind for `--device`: "cuda" or "emu"; one this machine lacks is exit 2."""
    try:
        return resolve_kind(requested)
    except ValueError as exc:  # e.g. cuda asked for on a machine without one
        raise InputError(str(exc), key="--device") from exc


@contextmanager
def open_device(requested: str) -> Iterator[DeviceHandle]:
    """The device for a run (the emulated one stays active for the whole block)."""
    kind = device_kind(requested)
    check_environment()
    with use_device(kind) as info:
        yield info
