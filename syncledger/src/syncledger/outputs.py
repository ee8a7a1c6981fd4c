"""Writing output files: THE one writer of every command's outputs (the harness's and the
ledger's own).

Outputs never destroy anything. A command declares what it writes and what it reads on an
`OutputPlan` before any work: an output whose path exists and is not a regular file (a
device, a FIFO, a socket, a folder) or is a symbolic link, that is another output of the same
command, or that is one of its inputs, is refused then (InputError, exit 2, one line naming
it); relative paths resolve against the folder the command was started in, whatever it
changes to later. Every file is then written atomically (a temporary file renamed over the
path), and the rename itself refuses a path that is not a regular file or is a link, so a
path replaced after the check is not replaced by the write either.

The temporary name is unique per process and thread, so two writers of one file (two
commands writing one report, threads of one process) never share it: each renames its own
whole file, the last one wins, and no reader ever sees a torn file.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from syncledger.errors import InputError

# What a path that is not a regular file is, by its type (lstat: a link is not followed).
_KINDS = {
    stat.S_ISLNK: "a symbolic link",
    stat.S_ISDIR: "a folder",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISFIFO: "a FIFO",
    stat.S_ISSOCK: "a socket",
}


def not_a_file(path: Path) -> str | None:
    """What `path` is when it exists and is not a regular file (a link is not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # absent, or its folder is not one: the folder's check says so
        return None
    return next((kind for test, kind in _KINDS.items() if test(mode)), None)


def refusal(kind: str) -> str:
    if kind == "a folder":
        return "is a folder, not a file"
    return f"is {kind}: an output never replaces one; name a regular file"


class OutputPlan:
    """The files one command writes and the files it reads, declared before any work.

    `write` and `read` return the path made absolute against `base` (default: the folder the
    command was started in): write those, whatever the working folder is by then."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = Path(base).absolute() if base is not None else Path.cwd()
        self._seen: dict[object, tuple[str, str]] = {}  # identity -> (output or input, option)

    def absolute(self, path: Path | str) -> Path:
        return self.base / path

    def read(self, path: Path | str, option: str) -> Path:
        """An input: no output of this command may land on it."""
        p = self.absolute(path)
        self._claim(p, str(path), "input", option)
        return p

    def write(self, path: Path | str, option: str) -> Path:
        """An output file: refused when it is not a regular file, a link, another output or an
        input; its folder is made and proven writable."""
        p = self.absolute(path)
        kind = not_a_file(p)
        if kind is not None:
            raise InputError(refusal(kind), file=str(path), key=option)
        self._claim(p, str(path), "output", option)
        check_writable(p.parent, option)
        return p

    def folder(self, path: Path | str, option: str) -> Path:
        """A folder the command writes files into (declare each with `write`): made and proven
        writable."""
        p = self.absolute(path)
        if os.path.lexists(p) and not p.is_dir():  # a folder, or a link to one
            raise InputError(
                f"is {not_a_file(p) or 'a file'}, not a folder", file=str(path), key=option
            )
        check_writable(p, option)
        return p

    def _claim(self, p: Path, given: str, role: str, option: str) -> None:
        identities = _identities(p)
        for identity in identities:
            seen = self._seen.get(identity)
            if seen is not None and "output" in (role, seen[0]):
                raise InputError(_clash(role, *seen), file=given, key=option)
        for identity in identities:
            self._seen.setdefault(identity, (role, option))


def _clash(role: str, other_role: str, other_option: str) -> str:
    """Why a path is refused that an earlier declaration (`other_role` of `other_option`) holds."""
    if other_role == "input":
        return f"is an input of this command ({other_option}): an output never overwrites it"
    if role == "input":
        return f"is the output of {other_option} too: an output never overwrites an input"
    return f"is the output of {other_option} too: two outputs need two paths"


def _identities(p: Path) -> list[object]:
    """What makes two paths one file: the same real path, or the same inode (a hard link)."""
    out: list[object] = [os.path.realpath(p)]
    try:
        st = os.stat(p)
    except OSError:
        return out
    return [*out, (st.st_dev, st.st_ino)]


def temporary_name(path: Path) -> Path:
    """A hidden sibling of `path` that no other process or thread will pick."""
    path = Path(path)
    unique = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    return path.with_name(f".{path.name}.{unique}.tmp")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write `path`'s content to; it is renamed onto `path` when the
    block succeeds (unless `path` is now not a regular file: InputError) and removed when it
    fails. An OSError (a full disk, a file-size limit) names `path`, not the temporary file
    nobody asked for."""
    tmp = temporary_name(path)
    try:
        yield tmp
        kind = not_a_file(path)
        if kind is not None:
            raise InputError(refusal(kind), file=str(path))
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
