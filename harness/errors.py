"""Errors the command line turns into a one-line message and an exit code."""

from __future__ import annotations


class InputError(Exception):
    """Bad input or usage: exit code 2, one line naming the file and the key."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        self.file = file
        self.key = key
        where = ": ".join(p for p in (file, key) if p)
        super().__init__(f"{where}: {message}" if where else message)


class CheckFailed(Exception):
    """A regression or a failed check: exit code 1."""


class Interrupted(Exception):
    """Ctrl-C during a run, with what was left behind (e.g. the incomplete run folder): exit
    code 130, one line."""
