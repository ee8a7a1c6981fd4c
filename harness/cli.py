"""`python -m harness COMMAND ...`: subcommands register themselves from `harness.commands`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from harness.errors import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_OPERATIONAL,
    EXIT_USAGE,
    CheckFailed,
    InputError,
    Interrupted,
    OperationalError,
    Terminated,
    os_error_text,
    stop_reason,
    stop_signal,
)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register `run(args) -> exit code` as subcommand `name`."""

    def wrap(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if name in COMMANDS:
            raise RuntimeError(f"command {name!r} registered twice")
        COMMANDS[name] = Command(name, help, configure, run)
        return run

    return wrap


def _load_commands() -> None:
    import harness.commands as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{info.name}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; keep it to one line
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    _load_commands()
    parser = _Parser(prog="python -m harness", description=__doc__, epilog=EXIT_CODES)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for cmd in sorted(COMMANDS.values(), key=lambda c: c.name):
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help, epilog=EXIT_CODES)
        cmd.configure(p)
        p.set_defaults(_run=cmd.run)
    return parser


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While a command runs, SIGTERM raises Terminated (a KeyboardInterrupt) where the program
    is, so it stops as Ctrl-C does: the run folder marked with the reason, one line."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    with sigterm_as_ctrl_c():
        try:
            args = build_parser().parse_args(argv)  # inside: Ctrl-C while torch imports is one line
            return int(args._run(args) or 0)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except CheckFailed as exc:
            print(f"FAILED: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except (OperationalError, OSError) as exc:  # the disk, a limit, the environment
            text = os_error_text(exc) if isinstance(exc, OSError) else str(exc)
            print(f"error: {text}", file=sys.stderr)
            return EXIT_OPERATIONAL
        except Interrupted as exc:
            head = "interrupted" if exc.signum == signal.SIGINT else stop_reason(exc.signum)
            print(f"{head}: {exc}", file=sys.stderr)
            return 128 + exc.signum
        except KeyboardInterrupt as exc:  # commands that leave something behind say what
            signum = stop_signal(exc)
            print(stop_reason(signum), file=sys.stderr)
            return 128 + signum
