"""The blocking oracle: how many times a call makes the host wait for the GPU, by the clock.

Method. A sleep kernel of D ms (`torch.cuda._sleep`, calibrated in cycles per ms with CUDA
events) is queued on the current stream, then the call is timed on the host. A call that waits
for the device waits for the sleep ahead of its own work. To count further waits, a watchdog
thread queues another D-ms sleep on the same stream at D/2, 3D/2, 5D/2, ... after the call began,
for as long as the call has not returned: each new sleep lands behind the work the call has
queued so far, so each further wait takes about D more. A wait does not take up a sleep queued
after it began (a stream synchronize waits for the work queued before it: `item`, one wait,
reads 1.0 D). The call's own duration is taken out by timing it on an idle device too:

    waits = max over REPEATS runs of round((t_behind_sleep - t_idle) / D).

A run can only miss a wait, never add one, hence the largest: a wait inside a copy to pageable
memory holds a driver lock, so the watchdog's next sleep is launched only when that wait ends
and can lose the race to the call's own next launch (seen on the H200: `histc` read 2 or 1 D,
two `.item()` calls always 2). Limits: a call that holds the GIL while it waits keeps the
watchdog from queuing the next sleep; host work of more than D between two waits lets a second
sleep in (an overcount); waits on another stream than the current one are not seen. The raw
ratio is kept, so a fraction far from a whole number shows an unclear case.

The oracle times the program without a profiler: the ledger's CUPTI detector is detached while
it runs (`cupti.paused`). Attached, CUPTI calls back into Python between the two driver calls of
one ATen copy to the host (the copy, then its stream synchronize), and the watchdog's launch,
held up until the copy's wait ends, lands between them: the synchronize waits for that sleep
too. Measured on an H200: `tolist` read 2 D in 5 runs of 5 with CUPTI attached, 1 D in every
run without it, and 1 D either way behind one sleep with no watchdog; attached, 13 catalogue
cases that copy device data to pageable host memory read one wait more than the ledger.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from syncledger import cupti

SLEEP_MS = 50.0
REPEATS = 5


@dataclass(frozen=True)
class Sleeper:
    """Queues sleep kernels of a fixed length on the current stream."""

    cycles: int
    ms: float

    @classmethod
    def calibrated(cls, ms: float = SLEEP_MS) -> Sleeper:
        torch.cuda._sleep(1_000_000)  # warm up the kernel
        torch.cuda.synchronize()
        probe = 100_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        cycles_per_ms = probe / start.elapsed_time(end)
        return cls(int(cycles_per_ms * ms), ms)

    def queue(self, stream: torch.cuda.Stream) -> None:
        with torch.cuda.stream(stream):
            torch.cuda._sleep(self.cycles)


@dataclass(frozen=True)
class Verdict:
    waits: int
    ratio: float  # (t_behind_sleep - t_idle) / D, the largest over the repeats
    idle_ms: float


def _host_ms(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1e3


def _behind_sleeps_ms(call: Callable[[], object], sleeper: Sleeper) -> float:
    stream = torch.cuda.current_stream()
    done = threading.Event()

    def requeue() -> None:
        k = 1
        while not done.wait(max(0.0, started + (k - 0.5) * sleeper.ms / 1e3 - time.perf_counter())):
            sleeper.queue(stream)
            k += 1

    sleeper.queue(stream)
    watchdog = threading.Thread(target=requeue, daemon=True)
    started = time.perf_counter()
    watchdog.start()
    try:
        return _host_ms(call)
    finally:
        done.set()
        watchdog.join()


def count_waits(
    prepare: Callable[[], Callable[[], object]], sleeper: Sleeper, repeats: int = REPEATS
) -> Verdict:
    """Waits of the call `prepare()` returns; `prepare` runs before each timing, untimed. CUPTI
    is detached meanwhile (see the module's docstring)."""
    idle, behind = [], []
    with cupti.paused():
        for _ in range(repeats):
            call = prepare()
            torch.cuda.synchronize()
            idle.append(_host_ms(call))
            call = prepare()
            torch.cuda.synchronize()
            behind.append(_behind_sleeps_ms(call, sleeper))
            torch.cuda.synchronize()
    idle_ms = statistics.median(idle)
    ratio = (max(behind) - idle_ms) / sleeper.ms
    return Verdict(max(0, round(ratio)), ratio, idle_ms)


# ---- the pageable staging threshold -----------------------------------------------------------

PAGE = 4 << 10
SIZES = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20]


def pageable_h2d_waits(nbytes: int, sleeper: Sleeper) -> Verdict:
    """Waits of one non_blocking copy of `nbytes` from pageable host memory to the device."""
    src = torch.empty(nbytes, dtype=torch.uint8)
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    return count_waits(lambda: lambda: dst.copy_(src, non_blocking=True), sleeper)


def staging_threshold(sleeper: Sleeper) -> tuple[int | None, list[tuple[int, Verdict]]]:
    """The largest pageable non_blocking host-to-device copy that returns at once (to 4 KiB),
    and every size tried with its verdict; None when even the smallest waits."""
    tried: list[tuple[int, Verdict]] = [(n, pageable_h2d_waits(n, sleeper)) for n in SIZES]
    staged = [n for n, v in tried if v.waits == 0]
    waited = [n for n, v in tried if v.waits > 0]
    if not staged:
        return None, tried
    if not waited:
        return max(staged), tried
    lo, hi = max(n for n in staged if n < min(waited)), min(waited)
    while hi - lo > PAGE:
        mid = (lo + hi) // 2 // PAGE * PAGE
        verdict = pageable_h2d_waits(mid, sleeper)
        tried.append((mid, verdict))
        lo, hi = (mid, hi) if verdict.waits == 0 else (lo, mid)
    return lo, tried
