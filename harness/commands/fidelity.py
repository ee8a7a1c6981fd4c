"""`python -m harness fidelity`: the upstream sync points beside the project lines, and with
`--execute` upstream's own code run beside the model, cell by cell."""

from __future__ import annotations

import argparse

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--execute",
        action="store_true",
        help="run every cell on upstream's code and on the model; print the side-by-side table "
        "and the agreement line (exit 1 when a cell differs that nothing explains)",
    )
    p.add_argument(
        "--upstream-tree",
        metavar="PATH",
        help="a sglang checkout (or an installed tree) to run instead of the set-up releases",
    )
    p.add_argument(
        "--upstream-release",
        metavar="VERSION",
        help="download this sglang release (pip, no dependencies) and run it",
    )
    p.add_argument(
        "--compare-to",
        metavar="VARIANT",
        help="the model variant to hold the tree or release against (before, after, dropped)",
    )
    p.add_argument(
        "--history",
        action="store_true",
        help="run the cells on every sglang release from 0.5.14 on (or --releases) and print "
        "each release's syncs per cell, what it changed, and its agreement with each variant",
    )
    p.add_argument(
        "--releases",
        nargs="+",
        metavar="VERSION",
        help="with --history: these releases instead of every one on the package index",
    )
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "emu"))
    p.add_argument(
        "--out", metavar="DIR", help="also write the table (table.md) and meta.json there"
    )


@command(
    "fidelity",
    help="print the fidelity table: each upstream sync point, per commit, beside the "
    "project file:line that reproduces it; --execute runs upstream's code beside the model, "
    "--history every release's",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.errors import InputError
    from harness.fidelity import anchors, load_table, render_markdown

    if args.releases and not args.history:
        raise InputError("--releases needs --history")
    if args.history:
        from harness.upstream.command import history_command

        return history_command(args)
    if not args.execute:
        if args.upstream_tree or args.upstream_release or args.compare_to or args.out:
            raise InputError(
                "--upstream-tree, --upstream-release, --compare-to and --out need --execute"
            )
        print(render_markdown(load_table(), anchors()))
        return 0
    from harness.upstream.command import execute_command

    return execute_command(args)
