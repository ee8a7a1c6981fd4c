"""The ledger: a context manager that records every host-device sync made by its thread, or by
every thread of its process (and the children it forks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from syncledger import children, cupti, hooks
from syncledger.events import RegionEntry, SyncEvent, SyncKind
from syncledger.failures import SyncBudgetExceeded
from syncledger.state import PROCESS_LEDGERS, STATE
from syncledger.within import Within, resolve_within

Scope = Literal["thread", "process"]
SCOPES = ("thread", "process")


@dataclass(frozen=True)
class LocationSummary:
    location: str
    function: str
    kind: str
    op: str
    region: str
    count: int
    stack: tuple[tuple[str, int, str], ...]


class SyncLedger:
    """Records host-device syncs until it is closed: those of the thread that opens it
    (`scope="thread"`, the default), or of every thread of the process (`scope="process"`, as
    `python -m syncledger` uses it: serving engines run their forward in worker threads).

    Either way the children the process forks are followed (`syncledger.children`) until
    they run exec; processes started otherwise, and forked children that run exec, are counted
    in `unfollowed_children`. Ledgers nest: an event is recorded in every ledger that records
    its thread. Non-blocking hazards (`SyncKind.PAGEABLE_STAGED`) are recorded too but are not
    syncs: counts, budgets and totals leave them out unless their kind is asked for by name. On
    CUDA the interceptors are installed once per process, at the first ledger; opening and
    closing a ledger only flips state (and PyTorch's sync debug mode while any ledger is open).
    `detectors` says what saw the syncs.
    """

    def __init__(self, scope: Scope = "thread") -> None:
        if scope not in SCOPES:
            raise ValueError(f"SyncLedger: scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        self.scope = scope
        self.events: list[SyncEvent] = []
        self.region_entries: list[RegionEntry] = []
        self.children: list[int] = []  # pids of the followed (forked) children with events
        self.unfollowed_children = 0  # processes started without fork, or that ran exec, while open
        self.detectors: tuple[str, ...] = ()
        self._thread: int | None = None
        self._spool: Path | None = None
        self._spool_owner = 0

    def __enter__(self) -> SyncLedger:
        if self._thread is not None:
            raise RuntimeError("this SyncLedger is already open; use a new one to nest")
        self._thread = threading.get_ident()
        children.install()
        if self.scope == "process":
            PROCESS_LEDGERS.append(self)
        else:
            STATE.ledgers.append(self)
        hooks.ledger_opened()
        self.detectors = ("emulated",) if STATE.emulated else hooks.detectors()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.scope == "thread" and threading.get_ident() != self._thread:
            raise RuntimeError(
                "SyncLedger closed on a different thread than the one that opened it; "
                "a thread-scoped ledger only sees its own thread's syncs (scope='process' "
                "sees every thread's)"
            )
        hooks.ledger_closed()
        if self.scope == "process":
            PROCESS_LEDGERS.remove(self)
        else:
            STATE.ledgers.remove(self)
        children.collect(self)

    def describe_detectors(self) -> str:
        """One line: what saw this ledger's syncs (and why CUPTI did not, on CUDA)."""
        if not self.detectors:
            return "detectors: none (no CUDA and no emulated device: nothing can sync)"
        line = f"detectors: {', '.join(self.detectors)}"
        if "interceptor" in self.detectors and "cupti" not in self.detectors:
            line += f" (CUPTI {cupti.status()})"
        return line

    # ---- queries -------------------------------------------------------------------------
    def count(
        self,
        kind: SyncKind | str | Iterable[SyncKind | str] | None = None,
        region: str | None = None,
        within: str | Iterable[str] | Within | None = None,
    ) -> int:
        """Number of syncs (or of events of the given kinds, hazards included when named),
        optionally inside `region` (prefix match), optionally only those whose stack passes
        through `within`'s packages or paths (`syncledger.within`)."""
        kinds = _kind_set(kind)
        code = None if within is None else resolve_within(within)
        return sum(1 for e in self.events if _matches(e, kinds, region, code))

    def by_location(self) -> list[LocationSummary]:
        """Events deduplicated by (location, kind, op, region), most frequent first."""
        groups: dict[tuple[str, str, str, str], list[SyncEvent]] = {}
        for e in self.events:
            groups.setdefault((e.location, e.kind.value, e.op, e.region), []).append(e)
        rows = [
            LocationSummary(loc, evs[0].function, kind, op, reg, len(evs), evs[0].stack)
            for (loc, kind, op, reg), evs in groups.items()
        ]
        return sorted(rows, key=lambda r: (-r.count, *_location_key(r.location)))

    def _process_notes(self) -> list[str]:
        notes = []
        threads = sorted({e.thread for e in self.events if e.thread})
        if len(threads) > 1:
            notes.append(f"from {len(threads)} threads: {', '.join(threads)}")
        if self.children:
            notes.append(f"{len(self.children)} forked child processes followed")
        if self.unfollowed_children:
            notes.append(
                f"{self.unfollowed_children} child processes started without fork or run by "
                "exec were not followed (their syncs are not here)"
            )
        return notes

    def format_table(self, stack_depth: int = 3) -> str:
        rows = self.by_location()
        notes = self._process_notes()
        if not rows:
            return "\n".join(["no host-device syncs recorded", *notes])
        syncs = self.count()
        hazards = len(self.events) - syncs
        head = f"{syncs} syncs at {sum(SyncKind(r.kind).is_sync for r in rows)} locations"
        if hazards:
            head += f" (and {hazards} non-blocking hazards, not counted)"
        lines = [head, *notes, f"{'count':>6}  {'kind':<15} {'op':<22} {'region':<28} location"]
        for r in rows:
            lines.append(
                f"{r.count:>6}  {r.kind:<15} {r.op:<22} {r.region or '-':<28} {r.location}"
            )
            for f, ln, fn in r.stack[1 : 1 + stack_depth]:
                lines.append(f"{'':>8}called from {f}:{ln} in {fn}")
        return "\n".join(lines)

    def to_json(self) -> str:
        rows = [
            {
                "location": r.location,
                "function": r.function,
                "kind": r.kind,
                "is_sync": SyncKind(r.kind).is_sync,
                "op": r.op,
                "region": r.region,
                "count": r.count,
                "stack": [f"{f}:{ln} {fn}" for f, ln, fn in r.stack],
            }
            for r in self.by_location()
        ]
        total = self.count()
        doc = {
            "total": total,
            "hazards": len(self.events) - total,
            "detectors": list(self.detectors),
            "threads": sorted({e.thread for e in self.events if e.thread}),
            "children_followed": self.children,
            "children_not_followed": self.unfollowed_children,
            "locations": rows,
        }
        return json.dumps(doc, indent=2)


def _location_key(location: str) -> tuple[str, int]:
    file, _, line = location.rpartition(":")
    return (file, int(line)) if line.isdigit() else (location, 0)


def _kind_set(kind: SyncKind | str | Iterable[SyncKind | str] | None) -> frozenset[str] | None:
    if kind is None:
        return None
    if isinstance(kind, (str, SyncKind)):
        kind = [kind]
    try:
        kinds = list(kind)
    except TypeError:
        raise TypeError(f"sync kinds: a kind or a list of kinds, got {kind!r}") from None
    if not kinds:
        raise ValueError("sync kinds: the list is empty, so nothing would be counted; leave it out")
    return frozenset(_kind_value(k) for k in kinds)


def _kind_value(kind: object) -> str:
    """The value of a SyncKind given by member or name; an unknown one lists the valid kinds."""
    try:
        return SyncKind(kind).value
    except ValueError:
        valid = ", ".join(k.value for k in SyncKind)
        raise ValueError(f"unknown sync kind {kind!r}; the kinds are: {valid}") from None


def _matches(
    e: SyncEvent, kinds: frozenset[str] | None, region: str | None, code: Within | None
) -> bool:
    if not (e.is_sync if kinds is None else e.kind.value in kinds):
        return False
    if region is not None and e.region != region and not e.region.startswith(region + "/"):
        return False
    return code is None or code.holds(e)


class max_syncs:
    """Raise `SyncBudgetExceeded` when the block makes more than `n` syncs (of `kinds`;
    hazards count only when their kind is named; with `within`, only those whose stack passes
    through these packages or paths: `syncledger.within`)."""

    def __init__(
        self,
        n: int,
        kinds: SyncKind | str | Iterable[SyncKind | str] | None = None,
        within: str | Iterable[str] | Within | None = None,
    ):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"max_syncs: the budget must be a non-negative int, got {n!r}")
        self.n = n
        self.kinds = _kind_set(kinds)
        self.within = None if within is None else resolve_within(within)
        self.ledger = SyncLedger()

    def __enter__(self) -> SyncLedger:
        return self.ledger.__enter__()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.ledger.__exit__(exc_type, *rest)
        if exc_type is not None:
            return
        counted = [e for e in self.ledger.events if _matches(e, self.kinds, None, self.within)]
        if len(counted) > self.n:
            kinds = "" if self.kinds is None else f" of kind {sorted(self.kinds)}"
            where = "" if self.within is None else f" within {self.within.describe()}"
            lines = [f"{len(counted)} host-device syncs{kinds}{where}, budget {self.n}:"]
            for e in counted:
                lines.append(f"  - {e.describe()}")
                lines.extend(f"      called from {f}:{ln} in {fn}" for f, ln, fn in e.stack[1:4])
            raise SyncBudgetExceeded("\n".join(lines))
