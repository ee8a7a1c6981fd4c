"""The reviewed snapshot file (`.sync-snapshots.json`): per test, per region, syncs by site.

    {
      "format": "harness-sync-snapshots",
      "format_version": 1,
      "device": "emu",
      "within": ["tinyserve"],
      "tests": {
        "tests/test_paging.py::test_page_table": {},
        "tests/test_paging.py::test_plan": {
          "plan": {"d2h_read item in plan (tinyserve/paging.py)": 1}
        }
      }
    }

`within` (present only when set) is the ini option `sync_within` the entries were counted
with. A test maps each region it synced in (`""`: outside any region) to its sync sites, each
"<kind> <op> in <function> (<file>)" with no line number, and their events. A test that made no
sync maps to `{}`: kept, so a first sync later is a change. Keys are sorted, so that the file's
diff shows only what a reviewer must judge. Writes apply a change set to the file as it is at
that moment, under a lock on its folder, then rename a whole new file into place: two
sessions that write at once each keep the other's entries, and no reader sees a torn file.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncledger.errors import InputError
from syncledger.outputs import write_atomic

FORMAT = "harness-sync-snapshots"
FORMAT_VERSION = 1
DEFAULT_NAME = ".sync-snapshots.json"
TOP_KEYS = ("format", "format_version", "device", "within", "tests")

Entry = dict[str, dict[str, int]]  # region -> site signature -> events


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def read_json(path: Path, shown: str | None = None) -> Any:
    """A reviewed JSON file, read strictly: unreadable, not UTF-8, malformed, or a key given
    twice in one object (which would silently override the first) is an InputError naming the
    file (as `shown`, default: the path) and the key."""
    where = shown or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", file=where) from None
    except OSError as exc:
        raise InputError(
            f"cannot read ({exc.strerror or type(exc).__name__})", file=where
        ) from None
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except _DuplicateKey as exc:
        raise InputError(
            "given twice in one object (the second would override the first)",
            file=where,
            key=exc.key,
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc})", file=where) from None


@dataclass
class Snapshots:
    path: Path
    device: str
    within: tuple[str, ...]
    tests: dict[str, Entry]


def entry_syncs(entry: Entry) -> int:
    return sum(n for sites in entry.values() for n in sites.values())


def load_snapshots(path: Path, shown: str) -> Snapshots | None:
    """The file at `path` (None when there is none), checked whole: any fault is an InputError
    naming the file (as `shown`) and the key."""
    where = shown
    if not path.exists():
        return None
    if not path.is_file():
        raise InputError("not a file", file=where)
    data = read_json(path, where)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(
            f"not a sync snapshot file (format is not {FORMAT!r})", file=where, key="format"
        )
    if data.get("format_version") != FORMAT_VERSION:
        raise InputError(
            f"written by format version {data.get('format_version')!r}; this plugin reads "
            f"version {FORMAT_VERSION} (re-record it with --sync-snapshot-update)",
            file=where,
            key="format_version",
        )
    for k in data:
        if k not in TOP_KEYS:
            raise InputError(f"unknown key (known: {', '.join(TOP_KEYS)})", file=where, key=k)
    if not isinstance(data.get("device"), str):
        raise InputError("expected the device the file was recorded on", file=where, key="device")
    within = data.get("within", [])
    if not isinstance(within, list) or not all(isinstance(w, str) and w for w in within):
        raise InputError("expected a list of packages or paths", file=where, key="within")
    tests = data.get("tests")
    if not isinstance(tests, dict):
        raise InputError("expected a mapping of test ids", file=where, key="tests")
    entries = {t: _entry(where, t, e) for t, e in tests.items()}
    return Snapshots(path, data["device"], tuple(within), entries)


def _entry(where: str, test: str, value: Any) -> Entry:
    if not isinstance(value, dict):
        raise InputError("expected a mapping of regions", file=where, key=f"tests.{test}")
    for region, sites in value.items():
        key = f"tests.{test}.{region!r}"
        if not isinstance(sites, dict) or not sites:
            raise InputError("expected a non-empty mapping of sync sites", file=where, key=key)
        for site, n in sites.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise InputError(
                    f"expected a positive integer, got {n!r}", file=where, key=f"{key}.{site}"
                )
    return value


def snapshot_text(device: str, within: tuple[str, ...], tests: dict[str, Entry]) -> str:
    doc: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION, "device": device}
    if within:
        doc["within"] = list(within)
    doc["tests"] = tests
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def apply_changes(
    path: Path,
    shown: str,
    device: str,
    within: tuple[str, ...],
    put: dict[str, Entry],
    drop: set[str],
) -> bool:
    """Set the entries of `put`, remove those of `drop`, in the file as it is now; True when
    the file changed."""
    with _folder_lock(path.parent):
        current = load_snapshots(path, shown)
        tests = dict(current.tests) if current else {}
        tests.update(put)
        for test in drop:
            tests.pop(test, None)
        same = current is not None and (current.device, current.within) == (device, within)
        if same and tests == current.tests:
            return False
        write_atomic(path, snapshot_text(device, within, tests))  # OSError: exit 3, naming it
        return True


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive advisory lock on the folder itself: no lock file is left behind, and the
    snapshot file's own inode is replaced by every write, so it cannot hold the lock."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
