"""The sync ledger: detect, classify and attribute host-device syncs, on CUDA and on CPU.

A general library: it imports nothing from the backend, serving, runner or scenarios.

    with SyncLedger() as led:
        with region("step"):
            ...
    print(led.format_table())
"""

from harness.sync.device import DEVICE_KINDS, DeviceInfo, use_device
from harness.sync.emulated import (
    EmulationError,
    EmuTensor,
    emulated_device,
    host_values,
    is_emulated,
)
from harness.sync.events import RegionEntry, SyncEvent, SyncKind
from harness.sync.ledger import SyncBudgetExceeded, SyncLedger, max_syncs
from harness.sync.nvtx_ranges import BACKEND as NVTX_BACKEND
from harness.sync.record import record_sync
from harness.sync.regions import region
from harness.sync.rules import pageable_staging_bytes, set_pageable_staging_bytes
from harness.sync.state import current_region, current_step, current_tags, set_step, tags
from harness.sync.timer import RegionTimer, region_timer
from harness.sync.wait_timer import WaitSample, WaitTimer, wait_timer

__all__ = [
    "DEVICE_KINDS",
    "NVTX_BACKEND",
    "DeviceInfo",
    "EmuTensor",
    "EmulationError",
    "RegionEntry",
    "RegionTimer",
    "SyncBudgetExceeded",
    "SyncEvent",
    "SyncKind",
    "SyncLedger",
    "WaitSample",
    "WaitTimer",
    "current_region",
    "current_step",
    "current_tags",
    "emulated_device",
    "host_values",
    "is_emulated",
    "max_syncs",
    "pageable_staging_bytes",
    "record_sync",
    "region",
    "region_timer",
    "set_pageable_staging_bytes",
    "set_step",
    "tags",
    "use_device",
    "wait_timer",
]
