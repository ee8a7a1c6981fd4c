"""Appending one sync event to every ledger open on this thread."""

from __future__ import annotations

from harness.sync.events import SyncEvent, SyncKind, capture_stack
from harness.sync.state import STATE, current_region


def record_sync(kind: SyncKind, op: str, nbytes: int | None = None, *, skip: int = 2) -> None:
    """Record one sync in every ledger active on this thread (nothing when none is)."""
    ledgers = STATE.ledgers
    if not ledgers or STATE.suppress:
        return
    stack = capture_stack(skip)
    top = stack[0] if stack else ("<unknown>", 0, "<unknown>")
    event = SyncEvent(
        kind=kind,
        op=STATE.op or op,
        region=current_region(),
        location=f"{top[0]}:{top[1]}",
        function=top[2],
        stack=stack,
        step=STATE.step,
        nbytes=nbytes,
        tags=STATE.tags,
    )
    for ledger in ledgers:
        ledger.events.append(event)
