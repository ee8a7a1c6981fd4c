"""A rank dies with its launcher, whatever kills the launcher (the OOM killer, SIGKILL, a crash).

torch's launcher asks the kernel for a SIGINT to each rank when the launcher dies, and a rank
blocked in a collective (in C++, where no Python handler runs) ignores it until the collective
times out: orphans that keep the cores busy for minutes. SIGKILL needs no handler. Linux only
(prctl); elsewhere the ranks rely on their collectives' timeouts.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int | None) -> bool:
    """Have the kernel SIGKILL this process when its parent exits; when the parent is gone
    already (`parent_pid` given and no longer the parent), exit at once. Returns whether the
    kernel took the request (False where there is no prctl)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:  # it died before the request
        os._exit(128 + signal.SIGKILL)
    return True
