"""The device tracer of the time pass's traced rounds: when the device ran work (kernels, copies,
memsets), from CUPTI's activity records (NVIDIA's `cupti-python`, the `[cupti]` extra).

CUPTI timestamps every piece of device work on one clock with the host's calls; the time pass
places each step's synchronizing calls on that timeline (harness.results.idle) to see the device
idle that follows each. Recording costs host time at every launch, so only the traced rounds
record: their steps are kept apart from the others (column `traced`), and what tracing costs a
step is their difference (the summary prints it).

A tracer hands back raw intervals on its own clock and says, when asked, how far its clock is
from `time.perf_counter_ns()` (asked at every traced step: the two clocks may drift apart).
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

from harness.results.idle import Interval

ENV = "HARNESS_DEVICE_TRACE"  # 0: no traced rounds
# Device work that keeps the device busy. Whole-graph records (GRAPH_TRACE) cannot be enabled
# with kernel records; kernel records cover the kernels inside graphs too.
ACTIVITY_KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET")
_BUFFER_BYTES = 8 * 1024 * 1024


class DeviceTracer(Protocol):
    def start(self) -> None:
        """Begin recording device work."""

    def stop(self) -> list[Interval]:
        """Stop; the work recorded since start(), on the tracer's clock (the device idle)."""

    def offset_ns(self) -> int:
        """The tracer's clock minus time.perf_counter_ns(), now."""


class CuptiTracer:
    """CUPTI's activity records of kernels, copies and memsets."""

    def __init__(self, api: Any):
        self.api = api
        self._records: list[Interval] = []
        self._registered = False

    def _kinds(self) -> list[Any]:
        return [getattr(self.api.ActivityKind, k) for k in ACTIVITY_KINDS]

    def start(self) -> None:
        if not self._registered:
            self.api.activity_register_callbacks(self._requested, self._completed)
            self._registered = True
        for kind in self._kinds():
            self.api.activity_enable(kind)

    def stop(self) -> list[Interval]:
        for kind in self._kinds():
            self.api.activity_disable(kind)
        self.api.activity_flush_all(1)  # forced: hands back partly filled buffers too
        out, self._records = self._records, []
        return out

    def offset_ns(self) -> int:
        before = time.perf_counter_ns()
        stamp = int(self.api.get_timestamp())
        after = time.perf_counter_ns()
        return stamp - (before + after) // 2

    @staticmethod
    def _requested() -> tuple[int, int]:
        return _BUFFER_BYTES, 0  # 0: as many records as fit

    def _completed(self, activities: list) -> None:
        self._records.extend((int(a.start), int(a.end)) for a in activities if getattr(a, "end", 0))


def open_tracer(device_kind: str) -> tuple[DeviceTracer | None, str]:
    """The tracer for this device, or None and why not."""
    if device_kind != "cuda":
        return None, "not measured: the emulated device has no device time"
    if os.environ.get(ENV, "1") == "0":
        return None, f"not measured: off ({ENV}=0)"
    try:
        from cupti import cupti as api  # optional: the [cupti] extra
    except ImportError:
        return None, "not measured: cupti-python is not installed (the [cupti] extra)"
    return CuptiTracer(api), "CUPTI activity records (kernels, copies, memsets)"
