"""`python -m harness COMMAND ...`: subcommands register themselves from `harness.commands`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass

from harness.errors import CheckFailed, InputError, Interrupted

EXIT_FAILED, EXIT_USAGE = 1, 2
EXIT_INTERRUPTED = 128 + 2  # SIGINT, as a shell reports a process Ctrl-C stopped


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
    parser = _Parser(prog="python -m harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for cmd in sorted(COMMANDS.values(), key=lambda c: c.name):
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.configure(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)  # inside: Ctrl-C while torch imports is one line
        return int(args._run(args) or 0)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CheckFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # commands that leave something behind say what (Interrupted)
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
