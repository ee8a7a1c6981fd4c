"""Child processes of a program under a ledger.

A child made by fork (`os.fork`, multiprocessing's "fork" start method, the default on Linux
before Python 3.14) starts with the parent's open ledgers; from then on each of its events is
also appended, one JSON line as it happens, to a spool file of the parent ledger, which merges
them (with the child's pid) when it closes. A child that exits with `os._exit`, as pool workers
do, loses nothing. Processes started any other way (multiprocessing's "spawn" and "forkserver",
`subprocess`, `os.exec*`, `os.posix_spawn`, `os.system`) run a fresh interpreter without the
ledger: they are not followed, and the ledger counts them so that its report says so.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.process
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncledger.events import SyncEvent
from syncledger.state import open_ledgers, watching

if TYPE_CHECKING:
    from syncledger.ledger import SyncLedger

_lock = threading.Lock()
_installed = False
# Every audited event in the process calls the hook, `id()` among them (and that is most): so
# the hook is one set lookup. "os.exec" is what every os.exec* function raises.
_UNFOLLOWED_AUDIT = frozenset(
    {"subprocess.Popen", "os.posix_spawn", "os.posix_spawnp", "os.system", "os.exec"}
)


class SpooledEvents(list):  # type: ignore[type-arg]
    """A child's events list: what it appends also goes, at once, to the parent's spool."""

    def __init__(self, existing: Iterable[SyncEvent], path: Path) -> None:
        super().__init__(existing)
        self._file = path.open("a", buffering=1, encoding="utf-8")

    def append(self, event: SyncEvent) -> None:
        super().append(event)
        self._file.write(json.dumps(event.to_json()) + "\n")

    def note_unfollowed(self, how: str) -> None:
        """This child started a process the ledger does not follow (`how`: the audit event, or
        multiprocessing's start method), or replaced its own program ("os.exec")."""
        # called from the audit hook, an error here would fail the program's call
        with contextlib.suppress(OSError, ValueError):
            self._file.write(json.dumps({"unfollowed": how}) + "\n")


def install() -> None:
    """Follow forks and count unfollowed starts, from now on in this process (once)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
    sys.addaudithook(_audit)
    start = multiprocessing.process.BaseProcess.start

    def start_noting_method(self: Any) -> None:
        if self._start_method not in (None, "fork") and watching():
            _note_unfollowed(self._start_method)
        return start(self)

    multiprocessing.process.BaseProcess.start = start_noting_method  # type: ignore[method-assign]


def _note_unfollowed(how: str) -> None:
    for ledger in open_ledgers():
        ledger.unfollowed_children += 1
        if isinstance(ledger.events, SpooledEvents):  # a followed child: its parent must know
            ledger.events.note_unfollowed(how)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _UNFOLLOWED_AUDIT and watching():
        _note_unfollowed(event)


def _before_fork() -> None:
    for ledger in open_ledgers():
        spool_dir(ledger)


def _after_fork_in_child() -> None:
    for ledger in open_ledgers():
        folder = ledger._spool
        if folder is not None:
            ledger.events = SpooledEvents(ledger.events, folder / f"{os.getpid()}.jsonl")


def spool_dir(ledger: SyncLedger) -> Path:
    """The folder where `ledger`'s forked children spool their events (made at the first fork)."""
    if ledger._spool is None:
        ledger._spool = Path(tempfile.mkdtemp(prefix="syncledger-children-"))
        ledger._spool_owner = os.getpid()
    return ledger._spool


def _read(path: Path) -> tuple[list[SyncEvent], int]:
    """A child's spooled events, and how many processes it started unfollowed: one more if it
    ran exec (once, however many paths os.execvp and the like tried)."""
    events, starts, ran_exec = [], 0, False
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            if "unfollowed" in record:
                ran_exec |= record["unfollowed"] == "os.exec"
                starts += record["unfollowed"] != "os.exec"
            else:
                events.append(SyncEvent.from_json(record))
        except (ValueError, KeyError, TypeError):
            continue  # a child killed mid-line: the whole lines before it still count
    return events, starts + ran_exec


def collect(ledger: SyncLedger) -> None:
    """Merge the followed children's events into `ledger` (in the process that opened it)."""
    folder = ledger._spool
    if folder is None or ledger._spool_owner != os.getpid():
        return
    for path in sorted(folder.glob("*.jsonl")):
        events, unfollowed = _read(path)
        ledger.children.append(int(path.stem))
        ledger.events.extend(events)
        ledger.unfollowed_children += unfollowed
    shutil.rmtree(folder, ignore_errors=True)
    ledger._spool = None
