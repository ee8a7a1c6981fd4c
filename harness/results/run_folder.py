"""A run folder `results/runs/<scenario>/<run-id>/`, incomplete until `finish()`.

While a run is in progress (or after it was interrupted) the folder holds an `INCOMPLETE`
marker and meta.json says `"status": "incomplete", "complete": false`, so no reader takes it for
a finished run. Every file is written atomically (write then rename), and meta.json records
each one's sha256 (`sha256`) and each table's row count (`rows`): readers
(`harness.results.read`) refuse a file that does not match.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.results.files import json_text, write_atomic, write_json
from harness.results.meta import utc_now
from harness.results.names import check_component
from harness.results.tables import csv_text

INCOMPLETE_MARKER = "INCOMPLETE"
DEFAULT_ROOT = Path("results/runs")


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"


class RunFolder:
    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path = Path(path)
        self.meta = meta
        self.files: list[str] = []

    @classmethod
    def create(cls, root: Path, scenario: str, run_id: str, meta: dict[str, Any]) -> RunFolder:
        # each a single component: the folder is made under root, never beside it
        path = Path(root) / check_component(scenario, key="name") / check_component(run_id)
        path.mkdir(parents=True, exist_ok=False)
        folder = cls(path, meta)
        try:
            write_atomic(path / INCOMPLETE_MARKER, f"started {utc_now()} pid {os.getpid()}\n")
            folder.write_meta()
        except OSError:  # a full disk: leave no folder that is not even marked incomplete
            for name in (INCOMPLETE_MARKER, "meta.json"):
                (path / name).unlink(missing_ok=True)
            path.rmdir()
            raise
        return folder

    @classmethod
    def reopen(cls, path: Path) -> RunFolder:
        """A run folder another process made (rank 0 of a DP run), to record why it stopped."""
        meta = meta_json(path)
        folder = cls(path, meta)
        folder.files = list(meta.get("files", []))
        return folder

    def write_meta(self) -> None:
        self.meta["files"] = sorted(set(self.files))
        write_json(self.path / "meta.json", self.meta)

    def write_table(self, table: str, rows: Iterable[Sequence[Any]]) -> int:
        text, n = csv_text(table, rows)
        self._write(f"{table}.csv", text)
        self.meta.setdefault("rows", {})[table] = n
        return n

    def write_json(self, name: str, obj: Any) -> None:
        self._write(name, json_text(obj))

    def _write(self, name: str, text: str) -> None:
        """Write one result file; its checksum reaches meta.json with the next write_meta()."""
        self.meta.setdefault("sha256", {})[name] = write_atomic(self.path / name, text)
        self.files.append(name)

    def finish(self, **extra: Any) -> None:
        """Mark the run complete: meta first, then drop the marker (a crash in between leaves
        the marker, so the run still reads as incomplete)."""
        self.meta.update(extra)
        self.meta.update(status="complete", complete=True, end_time=utc_now())
        self.write_meta()
        (self.path / INCOMPLETE_MARKER).unlink(missing_ok=True)

    def abandon(self, reason: str) -> None:
        """Record why the run stopped; it stays incomplete. Best effort: on a full disk the
        marker written at the start (and meta.json's "incomplete") may be all that remains,
        and that still reads as incomplete."""
        self.meta.update(status="incomplete", complete=False, end_time=utc_now(), stopped=reason)
        for write in (
            lambda: write_atomic(self.path / INCOMPLETE_MARKER, f"stopped {utc_now()}: {reason}\n"),
            self.write_meta,
        ):
            # the reason still reaches the user: the command's own message says it
            with contextlib.suppress(OSError):
                write()


def result_files(folder: Path, meta: dict[str, Any]) -> list[Path]:
    """The files a run folder is made of: meta.json and every file it records."""
    names = {*meta.get("files", []), *(meta.get("sha256") or {})}
    return [Path(folder) / "meta.json", *(Path(folder) / n for n in sorted(names))]


def meta_json(folder: Path) -> Any:
    """The parsed meta.json of a run folder, read the one way every reader reads it: as bytes,
    so a UTF-8 byte-order mark an editor added is skipped (OSError, ValueError otherwise)."""
    return json.loads((Path(folder) / "meta.json").read_bytes())


def is_complete(path: Path) -> bool:
    path = Path(path)
    if (path / INCOMPLETE_MARKER).exists():
        return False
    try:
        meta = meta_json(path)
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and bool(meta.get("complete"))
