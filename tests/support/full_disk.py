"""A full disk as the one output writer meets it: opening the file works, writing it fails
with ENOSPC and no file name (a full disk fails `write`, not `open`)."""

from __future__ import annotations

import errno
import os

import pytest


class _FullDisk:
    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def full_disk_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Every write through syncledger.outputs to a path holding `name` fails: the disk is full."""
    from syncledger import outputs

    def open_(path, mode="r", *args, **kwargs):
        f = open(path, mode, *args, **kwargs)  # noqa: SIM115 (closed by its caller's `with`)
        return _FullDisk(f) if name in str(path) else f

    monkeypatch.setattr(outputs, "open", open_, raising=False)
