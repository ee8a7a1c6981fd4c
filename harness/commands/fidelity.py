"""`python -m harness fidelity`: the upstream sync points beside the project lines."""

from __future__ import annotations

import argparse

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    del p  # no options


@command(
    "fidelity",
    help="print the fidelity table: each upstream sync point, per commit, beside the "
    "project file:line that reproduces it",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.fidelity import anchors, load_table, render_markdown

    print(render_markdown(load_table(), anchors()))
    return 0
