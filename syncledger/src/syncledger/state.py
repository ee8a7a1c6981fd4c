"""State shared by regions and ledgers: per thread (the region stack, the step, the tags, the
ledgers it opened) and per process (the ledgers that record every thread)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from syncledger.ledger import SyncLedger
    from syncledger.timer import RegionTimer
    from syncledger.wait_timing import WaitTimer


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.regions: list[str] = []  # full paths, innermost last
        self.ledgers: list[SyncLedger] = []  # thread-scoped ledgers this thread opened
        self.timers: list[RegionTimer] = []
        self.wait_timers: list[WaitTimer] = []
        self.step: int | None = None
        self.tags: tuple[tuple[str, str], ...] = ()
        self.suppress: int = 0  # >0 while an interceptor records the sync itself
        self.op: str | None = None  # outermost user-facing op being intercepted
        self.emulated: int = 0  # >0 while this thread runs on the emulated device


STATE = _ThreadState()
# Process-scoped ledgers: they record the syncs of every thread (appended and removed under the
# hooks' lock; read without it, as a list swap is atomic).
PROCESS_LEDGERS: list[SyncLedger] = []


def open_ledgers() -> list[SyncLedger]:
    """The ledgers that record this thread's syncs now: its own, then the process-wide ones."""
    mine = STATE.ledgers
    return mine + PROCESS_LEDGERS if PROCESS_LEDGERS else mine


def watching() -> bool:
    """Whether any ledger records this thread's syncs."""
    return bool(STATE.ledgers or PROCESS_LEDGERS)


def current_region() -> str:
    """The `/`-joined region path of this thread ('' outside any region)."""
    regions = STATE.regions
    return regions[-1] if regions else ""


def set_step(step: int | None) -> None:
    """Tag later events and region entries of this thread with `step`."""
    STATE.step = step


def current_step() -> int | None:
    return STATE.step


@contextmanager
def tags(**values: object) -> Iterator[None]:
    """Attach key=value tags (e.g. forward_mode, path) to events recorded inside the block."""
    saved = STATE.tags
    merged = dict(saved)
    merged.update({k: str(v) for k, v in values.items()})
    STATE.tags = tuple(sorted(merged.items()))
    try:
        yield
    finally:
        STATE.tags = saved


def current_tags() -> dict[str, str]:
    return dict(STATE.tags)
