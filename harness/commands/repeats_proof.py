"""`python -m harness repeats-proof --out DIR`: do answers survive a rerun? Three invocations of
one scenario with `--repeats N`, compared pairwise (harness.runner.repeats_proof)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True, help="folder for the runs and the tables")
    p.add_argument("--device", default="auto", help="auto, cuda or emu")
    p.add_argument("--scenario", default="specv2_mirror")
    p.add_argument("--repeats", type=int, default=5, help="worker processes per invocation")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")


@command(
    "repeats-proof",
    help="three invocations of a scenario with --repeats N, compared pairwise: do its answers "
    "survive a rerun?",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.runner.repeats_proof import prove

    return prove(args)
