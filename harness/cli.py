"""`python -m harness COMMAND ...`: the parser of the commands `harness.commands` registers,
exit codes and signals.

Only the command being run is configured (its options may need torch, e.g. the device
choices), so `python -m harness report` runs where only the results' readers are installed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import load_commands
from harness.errors import EXIT_CODES, OneLineParser, exit_code
from syncledger.events import skip_frames_of, skip_frames_under

DESCRIPTION = "`python -m harness COMMAND ...`: the sync and latency harness's commands."


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with `argv`, only the command it names is configured (the others are
    listed), without, every command."""
    commands = load_commands()
    chosen = argv[0] if argv and not argv[0].startswith("-") else None
    parser = OneLineParser(prog="python -m harness", description=DESCRIPTION, epilog=EXIT_CODES)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for cmd in sorted(commands.values(), key=lambda c: c.name):
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help, epilog=EXIT_CODES)
        if argv is None or cmd.name == chosen:
            cmd.configure(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # the dispatch to a command is never what caused a sync: stacks start below it
    here = Path(__file__).parent
    skip_frames_of(__file__, str(here / "errors.py"), str(here / "checks" / "registry.py"))
    skip_frames_under(str(here / "commands"))

    def run() -> int:
        args = build_parser(argv).parse_args(argv)  # inside: Ctrl-C while torch imports
        return int(args._run(args) or 0)

    return exit_code(run)
