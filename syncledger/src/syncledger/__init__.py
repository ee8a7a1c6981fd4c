"""The sync ledger: detect, classify and attribute host-device syncs, on CUDA and on CPU.

A general library: it imports nothing from the backend, serving, runner or scenarios. Its names
are imported on first use, so that a part that needs no torch (the pytest plugin, which pytest
loads in every run of an environment that has the harness) imports none.

    with SyncLedger() as led:
        with region("step"):
            ...
    print(led.format_table())
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# public name -> (module under syncledger, its name there)
_HOME = {
    "DEVICE_KINDS": ("device", "DEVICE_KINDS"),
    "DeviceInfo": ("device", "DeviceInfo"),
    "use_device": ("device", "use_device"),
    "EmuTensor": ("emulated", "EmuTensor"),
    "EmulationError": ("emulated", "EmulationError"),
    "emulated_device": ("emulated", "emulated_device"),
    "emulated_device_beside_gpu": ("emulated", "emulated_device_beside_gpu"),
    "host_values": ("emulated", "host_values"),
    "is_emulated": ("emulated", "is_emulated"),
    "RegionEntry": ("events", "RegionEntry"),
    "SyncEvent": ("events", "SyncEvent"),
    "SyncKind": ("events", "SyncKind"),
    "SyncBudgetExceeded": ("failures", "SyncBudgetExceeded"),
    "SyncMeasuredNothing": ("failures", "SyncMeasuredNothing"),
    "SyncMeasuredNothingWarning": ("failures", "SyncMeasuredNothingWarning"),
    "SyncLedger": ("ledger", "SyncLedger"),
    "max_syncs": ("ledger", "max_syncs"),
    "NVTX_BACKEND": ("nvtx_ranges", "BACKEND"),
    "record_sync": ("record", "record_sync"),
    "region": ("regions", "region"),
    "pageable_staging_bytes": ("rules", "pageable_staging_bytes"),
    "set_pageable_staging_bytes": ("rules", "set_pageable_staging_bytes"),
    "current_region": ("state", "current_region"),
    "current_step": ("state", "current_step"),
    "current_tags": ("state", "current_tags"),
    "set_step": ("state", "set_step"),
    "tags": ("state", "tags"),
    "RegionTimer": ("timer", "RegionTimer"),
    "region_timer": ("timer", "region_timer"),
    "WaitSample": ("wait_timing", "WaitSample"),
    "WaitTimer": ("wait_timing", "WaitTimer"),
    "wait_timer": ("wait_timing", "wait_timer"),
    "Within": ("within", "Within"),
    "resolve_within": ("within", "resolve_within"),
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:  # Any: type checkers then accept each name's uses
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _HOME[name]
    value = getattr(import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
