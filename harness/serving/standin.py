"""The stand-in forward: keeps the GPU busy for about ``forward_us`` so that a host-device sync's
real cost (the pipeline bubble behind it) shows in the end-to-end step time.

On CUDA it is one ``torch.cuda._sleep`` kernel (a clock spin) whose cycle count is calibrated
once per process and device; without ``_sleep`` it falls back to a calibrated loop of large
matmuls (few launches, so the host is not the bottleneck). Both are graph-capturable: no
allocation, no host read. On the emulated device it does nothing (no device time to model).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from syncledger import region

_MATMUL_N = 1024
# (device, method) -> device microseconds per unit (per 1000 sleep cycles, or per matmul)
_CALIBRATION: dict[tuple[str, str], float] = {}


def _time_us(fn: Callable[[], None], reps: int) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    fn()  # warm the kernel and the clocks
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / reps


def _calibrate(device: torch.device, method: str) -> float:
    key = (str(device), method)
    if key not in _CALIBRATION:
        with torch.cuda.device(device):
            if method == "sleep":
                cycles = 1_000_000
                per = _time_us(lambda: torch.cuda._sleep(cycles), 5) / (cycles / 1000)
            else:
                a = torch.randn(_MATMUL_N, _MATMUL_N, device=device)
                out = torch.empty_like(a)
                per = _time_us(lambda: torch.mm(a, a, out=out), 50)
        _CALIBRATION[key] = per
    return _CALIBRATION[key]


class StandInForward:
    """Callable ``forward(at_forward=None)`` marked as region ``forward``; capturable."""

    def __init__(self, forward_us: float, device: torch.device):
        self.forward_us = float(forward_us)
        self.device = device
        self.method = "sleep" if hasattr(torch.cuda, "_sleep") else "matmul"
        self.units = 0  # sleep cycles, or matmuls
        self._a = self._out = None

    def prepare(self) -> None:
        """Calibrate (once per process and device; it syncs, so call it during warm-up)."""
        if self.device.type != "cuda" or self.forward_us <= 0 or self.units:
            return
        per = _calibrate(self.device, self.method)
        if self.method == "sleep":
            self.units = max(1, round(self.forward_us / per * 1000))
        else:
            self.units = max(1, round(self.forward_us / per))
            self._a = torch.randn(_MATMUL_N, _MATMUL_N, device=self.device) * 0.01
            self._out = torch.empty_like(self._a)

    def __call__(self, at_forward: Callable[[], object] | None = None) -> None:
        """``at_forward``: host work the real forward does (e.g. sparse prefill's D2H)."""
        with region("forward"):
            if at_forward is not None:
                at_forward()
            if not self.units:
                return
            if self.method == "sleep":
                torch.cuda._sleep(self.units)
            else:
                for _ in range(self.units):
                    torch.mm(self._a, self._a, out=self._out)

    def measure_us(self, reps: int = 20) -> float:
        """Measured device time of one call (CUDA only; the GPU check reports it)."""
        if not self.units:
            return 0.0
        return _time_us(self, reps)
