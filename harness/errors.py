"""Errors the command line turns into a one-line message and an exit code.

Exit codes (the README's and every command's `--help` list them): 0 ok; 1 a regression or a
failed check (CheckFailed); 2 bad input or usage (InputError); 3 the environment failed the
run: a full disk, a file-size limit, a file that cannot be written, a bad environment
variable (OperationalError, or any OSError that reaches the command line); 128 + N when signal
N stopped it: 130 Ctrl-C, 143 SIGTERM (Interrupted).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import ParamSpec

# The errors and signal handling every command shares with the sync ledger's own command line.
from syncledger.errors import (
    EXIT_FAILED,
    EXIT_OPERATIONAL,
    EXIT_USAGE,
    MAX_MESSAGE,
    InputError,
    OneLineParser,
    OperationalError,
    Terminated,
    os_error_text,
    shown,
    sigterm_as_ctrl_c,
    stop_reason,
    stop_signal,
)
from syncledger.errors import exit_code as ledger_exit_code

__all__ = [
    "EXIT_CODES",
    "EXIT_FAILED",
    "EXIT_OPERATIONAL",
    "EXIT_USAGE",
    "MAX_MESSAGE",
    "CheckFailed",
    "InputError",
    "Interrupted",
    "OneLineParser",
    "OperationalError",
    "Terminated",
    "exit_code",
    "os_error_text",
    "shown",
    "sigterm_as_ctrl_c",
    "stop_reason",
    "stop_signal",
]

P = ParamSpec("P")
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


def exit_code(run: Callable[[], int]) -> int:
    """Run a command: its exit code, or the one its error stands for, said in one line (the
    ledger's codes, and 1 for a failed check)."""

    def checked() -> int:
        try:
            return run()
        except CheckFailed as exc:
            print(f"FAILED: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except Interrupted as exc:
            head = "interrupted" if exc.signum == signal.SIGINT else stop_reason(exc.signum)
            print(f"{head}: {exc}", file=sys.stderr)
            return 128 + exc.signum

    return ledger_exit_code(checked)
