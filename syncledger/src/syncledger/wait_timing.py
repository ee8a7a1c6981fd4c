"""Host time waited inside each synchronizing call, for a time pass (no ledger open).

While a `WaitTimer` is open on a thread, every call there that the ledger would count as a sync
appends one raw sample: where it was called (the first frame outside torch and the ledger),
its kind, the step, region and tags of the moment, and the nanoseconds the host spent inside
the call. Only synchronizing calls pay (a clock pair and a walk to the calling frame); every
other op runs as it does with no timer. On CUDA the interceptors' own synchronizing call sites
time themselves (stream, event and device synchronize, copies between host and device, ops
that read the device); on the emulated device the door does, and the time is that of the op on
the host (there is no device queue to wait for).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from syncledger.events import SyncKind, caller_frame
from syncledger.platform import cuda_present
from syncledger.state import STATE, current_region


class WaitSample(NamedTuple):
    site: str  # file:line of the call
    kind: str  # SyncKind value
    step: int | None
    region: str
    tags: tuple[tuple[str, str], ...]
    wait_ns: int
    start_ns: int  # time.perf_counter_ns() when the call began (to place it on a timeline)


@dataclass
class WaitTimer:
    """While open, every synchronizing call on this thread appends one WaitSample."""

    samples: list[WaitSample] = field(default_factory=list)

    def __enter__(self) -> WaitTimer:
        if cuda_present():  # the interceptors time CUDA's calls: install them if no ledger has
            from syncledger import hooks

            hooks.install()
        STATE.wait_timers.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.wait_timers.remove(self)


def wait_timer() -> WaitTimer:
    return WaitTimer()


def timing() -> bool:
    """Whether a wait timer is open on this thread."""
    return bool(STATE.wait_timers)


def timed(kind: SyncKind, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, a synchronizing call of `kind`; its host time is appended to this
    thread's open wait timers (the call is made alike when none is open)."""
    timers = STATE.wait_timers
    if not timers or not kind.is_sync:
        return fn(*args, **kwargs)
    t0 = time.perf_counter_ns()
    out = fn(*args, **kwargs)
    add_wait(kind, t0, time.perf_counter_ns() - t0)
    return out


def add_wait(kind: SyncKind, start_ns: int, wait_ns: int) -> None:
    """Append one measured wait (a call timed by its caller, begun at `start_ns` on
    time.perf_counter_ns()'s clock) to this thread's wait timers."""
    if not kind.is_sync:
        return
    frame = caller_frame(sys._getframe(1))
    site = f"{frame[0]}:{frame[1]}" if frame else "<unknown>"
    where = (STATE.step, current_region(), STATE.tags)
    sample = WaitSample(site, kind.value, *where, wait_ns, start_ns)
    for timer in STATE.wait_timers:
        timer.samples.append(sample)
