"""Appending one sync event to every ledger that records this thread."""

from __future__ import annotations

import os
import threading

from syncledger.events import SyncEvent, SyncKind, capture_stack
from syncledger.state import STATE, current_region, open_ledgers


def make_event(kind: SyncKind, op: str, nbytes: int | None, detector: str, skip: int) -> SyncEvent:
    stack = capture_stack(skip + 1)
    top = stack[0] if stack else ("<unknown>", 0, "<unknown>")
    return SyncEvent(
        kind=kind,
        op=STATE.op or op,
        region=current_region(),
        location=f"{top[0]}:{top[1]}",
        function=top[2],
        stack=stack,
        step=STATE.step,
        nbytes=nbytes,
        tags=STATE.tags,
        thread=threading.current_thread().name,
        pid=os.getpid(),
        detector=detector,
    )


def record_sync(
    kind: SyncKind,
    op: str,
    nbytes: int | None = None,
    *,
    skip: int = 2,
    detector: str = "interceptor",
) -> SyncEvent | None:
    """Record one sync in every ledger recording this thread (nothing when none is, or while an
    interceptor records the call itself); the event, or None."""
    if STATE.suppress:
        return None
    ledgers = open_ledgers()
    if not ledgers:
        return None
    event = make_event(kind, op, nbytes, detector, skip)
    for ledger in ledgers:
        ledger.events.append(event)
    return event
