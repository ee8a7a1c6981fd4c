"""Result files: CSV and JSON tables, written through the one output writer
(`syncledger.outputs`: atomic, a folder's writability checked before any work)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from syncledger.outputs import (
    OutputPlan,
    atomic_path,
    check_writable,
    json_text,
    sha256_hex,
    temporary_name,
    write_atomic,
)

__all__ = [
    "OutputPlan",
    "atomic_path",
    "check_writable",
    "json_text",
    "result_files",
    "sha256_hex",
    "temporary_name",
    "write_atomic",
    "write_dict_rows",
    "write_json",
]


def result_files(folder: Path, names: Iterable[str], option: str = "--out") -> dict[str, Path]:
    """The files a command writes into `folder` by name, declared before any work (OutputPlan:
    one it cannot write, or must not replace, is an InputError)."""
    plan = OutputPlan()
    return {name: plan.write(Path(folder) / name, option) for name in names}


def write_dict_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> str:
    """A CSV of `rows` (columns: every key, in first-seen order), written atomically."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    writer.writerows(rows)
    return write_atomic(path, out.getvalue())


def write_json(path: Path, obj: Any) -> str:
    """Write `obj` as indented JSON atomically; returns the sha256 of the bytes written."""
    return write_atomic(path, json_text(obj))
