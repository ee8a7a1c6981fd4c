"""Errors the command line turns into a one-line message and an exit code.

Exit codes (the README's and every command's `--help` list them): 0 ok; 1 a regression or a
failed check (CheckFailed); 2 bad input or usage (InputError); 3 the environment failed the
run: a full disk, a file-size limit, a file that cannot be written, a bad environment
variable (OperationalError, or any OSError that reaches the command line); 128 + N when signal
N stopped it: 130 Ctrl-C, 143 SIGTERM (Interrupted).
"""

from __future__ import annotations

import signal

# The errors and signal handling every command shares with the sync ledger's own command line.
from syncledger.errors import (
    EXIT_FAILED,
    EXIT_OPERATIONAL,
    EXIT_USAGE,
    MAX_MESSAGE,
    InputError,
    OperationalError,
    Terminated,
    os_error_text,
    shown,
    sigterm_as_ctrl_c,
    stop_reason,
    stop_signal,
)

__all__ = [
    "EXIT_CODES",
    "EXIT_FAILED",
    "EXIT_OPERATIONAL",
    "EXIT_USAGE",
    "MAX_MESSAGE",
    "CheckFailed",
    "InputError",
    "Interrupted",
    "OperationalError",
    "Terminated",
    "os_error_text",
    "shown",
    "sigterm_as_ctrl_c",
    "stop_reason",
    "stop_signal",
]

EXIT_CODES = (
    "exit codes: 0 ok, 1 a regression or a failed check, 2 bad input or usage, 3 the "
    "environment failed (disk full, file too large, unwritable file, bad environment "
    "variable), 130 Ctrl-C, 143 SIGTERM"
)


class CheckFailed(Exception):
    """A regression or a failed check: exit code 1."""


class Interrupted(Exception):
    """A signal stopped a run, with what was left behind (e.g. the incomplete run folder):
    exit code 128 + the signal (130 Ctrl-C, 143 SIGTERM), one line."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        self.signum = int(signum)
        super().__init__(message)
