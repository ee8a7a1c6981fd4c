"""Errors a command turns into a one-line message and an exit code, shared by the ledger's
command line and its pytest plugin (and by any tool built on the ledger).

Exit codes: 0 ok; 1 a failed check; 2 bad input or usage (InputError); 3 the environment
failed the run: a full disk, a file-size limit, a file that cannot be written, a bad
environment variable (OperationalError, or any OSError that reaches the command line);
128 + N when signal N stopped it: 130 Ctrl-C, 143 SIGTERM (Terminated).
"""

from __future__ import annotations

import argparse
import errno
import os
import reprlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

from syncledger.console import fit_console

EXIT_FAILED, EXIT_USAGE, EXIT_OPERATIONAL = 1, 2, 3
# What an error may echo of a value, and a whole message at most: a value that expands to
# megabytes (a YAML alias bomb) must not become a megabyte-long line.
_ECHO = reprlib.Repr()
_ECHO.maxstring = _ECHO.maxother = 60
_ECHO.maxlist, _ECHO.maxdict, _ECHO.maxlevel = 8, 6, 3
MAX_MESSAGE = 800


def shown(value: object) -> str:
    """`repr(value)`, cut short (with '...') when long or deeply nested."""
    return _ECHO.repr(value)


def _bounded(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


class InputError(Exception):
    """Bad input or usage: exit code 2, one line naming the file and the key."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None):
        self.file = file
        self.key = key
        where = ": ".join(p for p in (file, key) if p)
        super().__init__(_bounded(f"{where}: {message}" if where else message))


class OperationalError(Exception):
    """The environment failed the run (disk full, file too large, an unwritable file, a bad
    environment variable): exit code 3, one line naming the file and the cause."""


def os_error_text(exc: OSError) -> str:
    """'FILE: cause' of an OSError (the cause from its errno when it has no message)."""
    cause = exc.strerror or (os.strerror(exc.errno) if exc.errno else "") or str(exc)
    if exc.errno == errno.EFBIG:
        cause += " (the file-size limit, ulimit -f)"
    return f"{exc.filename}: {cause}" if exc.filename else cause


class Terminated(KeyboardInterrupt):
    """SIGTERM (what CI and `timeout` send), raised where the program is: a KeyboardInterrupt,
    so every place that handles Ctrl-C handles it the same way."""

    signum = signal.SIGTERM


def stop_signal(exc: BaseException) -> int:
    """The signal a KeyboardInterrupt stands for: SIGTERM for Terminated, else SIGINT."""
    return int(getattr(exc, "signum", signal.SIGINT))


def stop_reason(signum: int) -> str:
    """What stopped a run, as its folder records it: 'interrupted (Ctrl-C)' for SIGINT."""
    if signum == signal.SIGINT:
        return "interrupted (Ctrl-C)"
    return f"terminated ({signal.Signals(signum).name})"


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While a command runs, SIGTERM raises Terminated (a KeyboardInterrupt) where the program
    is, so it stops as Ctrl-C does: what it leaves behind is marked with the reason."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(run: Callable[[], int]) -> int:
    """Run a command: its exit code, or the one its error stands for, said in one line (bad
    input 2; the environment 3; a signal 128 + N). A terminal that cannot show µ gets "us"."""
    fit_console()
    with sigterm_as_ctrl_c():
        try:
            return int(run() or 0)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except (OperationalError, OSError) as exc:  # the disk, a limit, the environment
            text = os_error_text(exc) if isinstance(exc, OSError) else str(exc)
            print(f"error: {text}", file=sys.stderr)
            return EXIT_OPERATIONAL
        except KeyboardInterrupt as exc:  # commands that leave something behind say what
            signum = stop_signal(exc)
            print(stop_reason(signum), file=sys.stderr)
            return 128 + signum


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")
