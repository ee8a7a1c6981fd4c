"""What kind of wait a detector saw inside an intercepted call, and what happens when a rule
fails: shared by the sync debug mode's hook and the CUPTI detector."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from syncledger.events import SyncKind
from syncledger.state import STATE

_warned_ops: set[str] = set()


class _Call(threading.local):
    """The indexing call being intercepted on this thread, to classify its waits lazily."""

    def __init__(self) -> None:
        self.rule: Callable[..., list[SyncKind]] | None = None
        self.args: tuple[Any, ...] = ()
        self.kinds: list[SyncKind] | None = None


CALL = _Call()


def classification_failed(op: str, exc: BaseException) -> SyncKind:
    """A rule raised while classifying `op`: warn once per op; the event is `unclassified`."""
    if op not in _warned_ops:
        _warned_ops.add(op)
        warnings.warn(
            f"syncledger could not classify a call of {op} ({type(exc).__name__}: {exc}); "
            "it is recorded as 'unclassified' and the program goes on unchanged",
            RuntimeWarning,
            stacklevel=3,
        )
    return SyncKind.UNCLASSIFIED


def implicit_kind() -> SyncKind:
    """The kind of the next wait seen inside the intercepted call: from its indexing rule, else
    a device read."""
    call = CALL
    try:
        if call.kinds is None and call.rule is not None:
            call.kinds = call.rule(*call.args)
    except Exception as exc:
        call.rule = None
        return classification_failed(STATE.op or "an indexing call", exc)
    return call.kinds.pop(0) if call.kinds else SyncKind.D2H_READ
