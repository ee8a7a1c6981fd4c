"""`python -m harness COMMAND ...`: the parser of the commands `harness.commands` registers,
exit codes and signals.

Only the command being run is configured (its options may need torch, e.g. the device
choices), so `python -m harness report` runs where only the results' readers are installed."""

from __future__ import annotations

import argparse
import signal
import sys

from harness.commands import load_commands
from harness.errors import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_OPERATIONAL,
    EXIT_USAGE,
    CheckFailed,
    InputError,
    Interrupted,
    OperationalError,
    os_error_text,
    sigterm_as_ctrl_c,
    stop_reason,
    stop_signal,
)

DESCRIPTION = "`python -m harness COMMAND ...`: the sync and latency harness's commands."


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; keep it to one line
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with `argv`, only the command it names is configured (the others are
    listed), without, every command."""
    commands = load_commands()
    chosen = argv[0] if argv and not argv[0].startswith("-") else None
    parser = _Parser(prog="python -m harness", description=DESCRIPTION, epilog=EXIT_CODES)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for cmd in sorted(commands.values(), key=lambda c: c.name):
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help, epilog=EXIT_CODES)
        if argv is None or cmd.name == chosen:
            cmd.configure(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    with sigterm_as_ctrl_c():
        try:
            argv = sys.argv[1:] if argv is None else argv
            args = build_parser(argv).parse_args(argv)  # inside: Ctrl-C while torch imports
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
