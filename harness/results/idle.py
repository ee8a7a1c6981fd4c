"""Where a traced step's device time goes, from device timestamps: the device's busy intervals
(kernels, copies and memsets, as recorded by the device tracer) and the step's synchronizing
calls (where the host called each, and how long it waited), all on the host's
`time.perf_counter_ns` clock.

The idle after a call is the device idle from the call until the next synchronizing call of the
step (or the end of the step's device work): a sync drains the queue, and every gap the device
then shows until the host waits again follows from it. What the call costs the step is the part
of that idle its wait put there: without the call the host would have gone on `wait` earlier,
so every launch after it, and the device work they start, would move earlier by at most the wait
and at most the idle there was to remove (a device that stayed busy cannot finish sooner):

    cost = min(host wait, idle after)

Both are kept per call (waits.csv); the cost is computed when the run is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Interval = tuple[int, int]  # [start, end) ns


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of intervals, as sorted disjoint intervals (empty ones dropped)."""
    out: list[list[int]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def idle_between(busy: Sequence[Interval], lo: int, hi: int) -> int:
    """Idle ns in [lo, hi) given merged busy intervals."""
    if hi <= lo:
        return 0
    covered = sum(max(0, min(e, hi) - max(s, lo)) for s, e in busy)
    return hi - lo - covered


@dataclass(frozen=True)
class StepTimeline:
    busy_ns: int  # device busy inside the step (the union of its work)
    span_ns: int  # from the step's start on the host to the end of its last device work
    idle_after_ns: tuple[int, ...]  # per call, in the order given


def step_timeline(
    start_ns: int, work: Iterable[Interval], calls: Sequence[tuple[int, int]]
) -> StepTimeline:
    """The step that began at `start_ns`: device work `work` (intervals; what began before the
    step is clipped to it) and its synchronizing calls `calls` ((start_ns, wait_ns) each)."""
    busy = merge((max(s, start_ns), e) for s, e in work)
    end = busy[-1][1] if busy else start_ns
    starts = sorted(c[0] for c in calls)
    idle = []
    for call_start, _wait in calls:
        later = [s for s in starts if s > call_start]
        until = max(call_start, min(later[0], end) if later else end)
        idle.append(idle_between(busy, call_start, until))
    return StepTimeline(sum(e - s for s, e in busy), end - start_ns, tuple(idle))
