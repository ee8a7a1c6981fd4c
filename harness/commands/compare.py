"""`python -m harness compare RUN_A RUN_B`: each cell of B against A, counts and step time."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a", type=Path, help="run folder A (the reference)")
    p.add_argument("run_b", type=Path, help="run folder B")
    p.add_argument("--all", action="store_true", help="show unchanged rows too")
    p.add_argument(
        "--other-scenario",
        action="store_true",
        help="compare runs of different scenarios (cells matched without the scenario name)",
    )


@command(
    "compare", help="side-by-side diff of two run folders' counts and latency", configure=_configure
)
def run(args: argparse.Namespace) -> int:
    from harness.results.compare import compare_runs

    print(compare_runs(args.run_a, args.run_b, args.all, args.other_scenario))
    return 0
