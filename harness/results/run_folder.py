"""A run folder `results/runs/<scenario>/<run-id>/`, incomplete until `finish()`.

While a run is in progress (or after it was interrupted) the folder holds an `INCOMPLETE`
marker and meta.json says `"status": "incomplete", "complete": false`, so no reader takes it for
a finished run. Every file is written atomically (write then rename), and meta.json records
each one's sha256 (`sha256`) and each table's row count (`rows`): readers
(`harness.results.read`) refuse a file that does not match.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.results.files import json_text, write_atomic, write_json
from harness.results.meta import utc_now
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
        path = Path(root) / scenario / run_id
        path.mkdir(parents=True, exist_ok=False)
        folder = cls(path, meta)
        write_atomic(path / INCOMPLETE_MARKER, f"started {utc_now()} pid {os.getpid()}\n")
        folder.write_meta()
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
        """Record why the run stopped; it stays incomplete."""
        self.meta.update(status="incomplete", complete=False, end_time=utc_now(), stopped=reason)
        self.write_meta()
        write_atomic(self.path / INCOMPLETE_MARKER, f"stopped {utc_now()}: {reason}\n")


def is_complete(path: Path) -> bool:
    path = Path(path)
    if (path / INCOMPLETE_MARKER).exists():
        return False
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return bool(meta.get("complete"))
