"""Appending one sync event to every ledger that records this thread.

Recording takes what identifies the sync at that moment and formats nothing: the site as code
objects and instructions (`events.capture_site`), the region path, step and tags as they are.
"""

from __future__ import annotations

import os
import threading

from syncledger.events import SyncEvent, SyncKind, capture_site
from syncledger.state import PROCESS_LEDGERS, STATE

_current_thread = threading.current_thread
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


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
    st = STATE
    if st.suppress:
        return None
    mine = st.ledgers
    if not (mine or PROCESS_LEDGERS):
        return None
    regions = st.regions
    event = SyncEvent(
        kind,
        st.op or op,
        regions[-1] if regions else "",
        capture_site(skip),
        st.step,
        nbytes,
        st.tags,
        _current_thread().name,
        _pid,
        detector,
    )
    for ledger in mine:
        ledger.events.append(event)
    for ledger in PROCESS_LEDGERS:
        ledger.events.append(event)
    return event
