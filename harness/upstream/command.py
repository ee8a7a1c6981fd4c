"""`python -m harness fidelity --execute`: which trees run, against which variant, and the
verdict."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from harness.errors import InputError
from harness.fidelity import load_table
from harness.upstream.releases import (
    DEFAULT_RELEASES,
    download_release,
    installed_release,
    tree_root,
)
from harness.variants import variant_names

# (tree root, label, variant, the table's lines apply)
Run = tuple[Path, str, str, bool]


def _runs(args: argparse.Namespace, stack: ExitStack) -> Iterator[Run]:
    if args.upstream_tree and args.upstream_release:
        raise InputError("--upstream-tree and --upstream-release: give one")
    if args.compare_to is not None and args.compare_to not in variant_names():
        raise InputError(
            f"--compare-to {args.compare_to}: known variants are {', '.join(variant_names())}"
        )
    if args.upstream_tree or args.upstream_release:
        known = {r.version: r.variant for r in DEFAULT_RELEASES}
        variant = args.compare_to or known.get(args.upstream_release)
        if variant is None:
            raise InputError(
                "--compare-to VARIANT is needed with --upstream-tree or an unlisted release"
            )
        if args.upstream_tree:
            root = tree_root(Path(args.upstream_tree), "--upstream-tree")
            yield root, str(args.upstream_tree), variant, True
        else:
            into = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            root = download_release(args.upstream_release, into)
            yield root, args.upstream_release, variant, False
        return
    for release in DEFAULT_RELEASES:
        yield installed_release(release), release.version, release.variant, release.exact_lines


def execute_command(args: argparse.Namespace) -> int:
    from harness.upstream.execute import execute
    from harness.upstream.loader import TreeDrift
    from harness.upstream.output import output_files, write_output
    from harness.upstream.report import render, verdict
    from syncledger import use_device

    table = load_table()
    executions = []
    with ExitStack() as stack:
        runs = list(_runs(args, stack))
        files = output_files(Path(args.out)) if args.out else None  # before any tree runs
        info = stack.enter_context(use_device(args.device))
        print(f"device: {info.kind} ({info.name})")
        for root, label, variant, exact in runs:
            try:
                ex = execute(
                    root,
                    variant,
                    info.device,
                    emulated=info.kind == "emu",
                    label=label,
                    exact_lines=exact,
                )
            except TreeDrift as drift:
                raise InputError(str(drift)) from None
            executions.append(ex)
            print(render(ex, table.executed_differences.get(label, {})))
            print()
    result = verdict(executions, table, table.executed_differences)
    for cell in result.unexplained:
        print(f"differs, unexplained: {cell}")
    print(result.line())
    if files is not None:
        write_output(files, executions, result, args, info)
    return 1 if result.unexplained else 0
