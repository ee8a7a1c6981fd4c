"""Writing output files: atomically (write a temporary file, then rename), and a folder's
writability checked before any work that would write there.

The temporary name is unique per process and thread, so two writers of one file (two
commands writing one report, threads of one process) never share it: each renames its own
whole file, the last one wins, and no reader ever sees a torn file.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from syncledger.errors import InputError


def temporary_name(path: Path) -> Path:
    """A hidden sibling of `path` that no other process or thread will pick."""
    path = Path(path)
    unique = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    return path.with_name(f".{path.name}.{unique}.tmp")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write `path`'s content to; it is renamed onto `path` when the
    block succeeds and removed when it fails. An OSError (a full disk, a file-size limit)
    names `path`, not the temporary file nobody asked for."""
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        if exc.filename in (None, str(tmp), tmp):
            exc.filename = str(path)
        raise
    finally:
        tmp.unlink(missing_ok=True)  # gone already after a successful rename


def write_atomic(path: Path, data: str | bytes) -> str:
    """Write `data` (str: UTF-8) atomically and durably; returns the sha256 of the bytes written."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(Path(path)) as tmp, open(tmp, "xb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    return sha256_hex(raw)


def json_text(obj: Any) -> str:
    """Strict JSON: a NaN or infinity raises instead of writing a bare `NaN` no parser reads."""
    return json.dumps(obj, indent=2, sort_keys=False, default=str, allow_nan=False) + "\n"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_writable(folder: Path, key: str) -> None:
    """Create `folder` if needed and prove a file can be made in it, before any pass runs;
    otherwise one line naming the folder and the option (InputError, exit 2)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(
            f"cannot write results here ({reason})", file=str(folder), key=key
        ) from None
