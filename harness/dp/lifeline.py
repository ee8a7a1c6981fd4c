"""A rank dies with its launcher, whatever kills the launcher (the OOM killer, SIGKILL, a crash).

torch's launcher asks the kernel for a SIGINT to each rank when the launcher dies, and a rank
blocked in a collective (in C++, where no Python handler runs) ignores it until the collective
times out: orphans that keep the cores busy for minutes. SIGKILL needs no handler. Linux only
(prctl); elsewhere the ranks rely on their collectives' timeouts.

A rank forked by the launcher's fork server has the server for its parent, and the server
itself dies with the launcher (harness.dp.fork_server).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(launcher_pid: int | None) -> bool:
    """Have the kernel SIGKILL this process when its parent exits; when the launcher is gone
    already (`launcher_pid` given, and neither the parent nor, through the fork server, the
    parent's parent), exit at once. Returns whether the kernel took the request (False where
    there is no prctl)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    if launcher_pid is not None and launcher_pid not in _parent_and_its_parent():
        os._exit(128 + signal.SIGKILL)  # it died before the request
    return True


def _parent_and_its_parent() -> tuple[int, int | None]:
    parent = os.getppid()
    try:
        stat = Path(f"/proc/{parent}/stat").read_text()
    except OSError:  # the parent is gone
        return parent, None
    return parent, int(stat.rsplit(")", 1)[1].split()[1])
