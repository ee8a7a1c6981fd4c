"""`python -m harness fidelity --execute` and `--history`: which trees run, against which
variants, and the verdict."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError
from harness.fidelity import load_table
from harness.upstream.releases import (
    DEFAULT_RELEASES,
    installed_release,
    published_releases,
    release_tree,
    sorted_releases,
    tree_root,
)
from harness.variants import variant_names


@dataclass(frozen=True)
class Target:
    root: Path  # the folder holding sglang/
    label: str
    variant: str
    same_files: tuple[str, ...] | None  # as harness.upstream.execute.Execution


def _targets(args: argparse.Namespace) -> list[Target]:
    if args.upstream_tree and args.upstream_release:
        raise InputError("--upstream-tree and --upstream-release: give one")
    if args.compare_to is not None and args.compare_to not in variant_names():
        raise InputError(
            f"--compare-to {args.compare_to}: known variants are {', '.join(variant_names())}"
        )
    if not (args.upstream_tree or args.upstream_release):
        return [
            Target(installed_release(r), r.version, r.variant, r.same_files)
            for r in DEFAULT_RELEASES
        ]
    known = {r.version: r for r in DEFAULT_RELEASES}
    listed = known.get(args.upstream_release)
    variant = args.compare_to or (listed.variant if listed else None)
    if variant is None:
        raise InputError(
            "--compare-to VARIANT is needed with --upstream-tree or an unlisted release"
        )
    if args.upstream_tree:
        root = tree_root(Path(args.upstream_tree), "--upstream-tree")
        return [Target(root, str(args.upstream_tree), variant, None)]
    root = release_tree(args.upstream_release, "--upstream-release")
    return [Target(root, args.upstream_release, variant, listed.same_files if listed else ())]


def _output_files(args: argparse.Namespace) -> dict[str, Path] | None:
    """The --out files, declared before any tree runs."""
    if not args.out:
        return None
    from harness.upstream.output import output_files

    return output_files(Path(args.out))


def execute_command(args: argparse.Namespace) -> int:
    from harness.upstream.execute import execute
    from harness.upstream.loader import TreeDrift
    from harness.upstream.report import render, verdict
    from syncledger import use_device

    table = load_table()
    targets = _targets(args)
    files = _output_files(args)
    executions = []
    with use_device(args.device) as info:
        print(f"device: {info.kind} ({info.name})")
        for t in targets:
            try:
                (ex,) = execute(
                    t.root,
                    (t.variant,),
                    info.device,
                    emulated=info.kind == "emu",
                    label=t.label,
                    same_files=t.same_files,
                )
            except TreeDrift as drift:
                raise InputError(str(drift)) from None
            executions.append(ex)
            print(render(ex, table.executed_differences.get(t.label, {})))
            print()
    result = verdict(executions, table, table.executed_differences)
    for cell in result.unexplained:
        print(f"differs, unexplained: {cell}")
    print(result.line())
    if files is not None:
        from harness.upstream.output import write_output
        from harness.upstream.report import render_all

        upstream = [{"tree": ex.label, "variant": ex.variant} for ex in executions]
        body = render_all(executions, table.executed_differences)
        write_output(files, f"{body}\n\n{result.line()}\n", result.line(), upstream, info)
    return 1 if result.unexplained else 0


def history_command(args: argparse.Namespace) -> int:
    """Every release from the DeepSeek-V4 backend's first on: upstream's syncs per cell, what
    each release changed, and its agreement with each variant. Exit 2 when a release drifted
    beyond what the loader understands (its line says where), after the others ran."""
    from harness.upstream.history import render_history, run_history
    from syncledger import use_device

    if args.upstream_tree or args.upstream_release or args.compare_to:
        raise InputError(
            "--history runs releases against every variant: no --upstream-tree, "
            "--upstream-release or --compare-to"
        )
    files = _output_files(args)
    versions = sorted_releases(args.releases) if args.releases else published_releases()
    if not versions:
        raise InputError("--releases: none from the DeepSeek-V4 backend's first release on")
    roots = {v: release_tree(v, "--releases") for v in versions}
    with use_device(args.device) as info:
        print(f"device: {info.kind} ({info.name})")
        runs = run_history(roots, info.device, emulated=info.kind == "emu")
    text = render_history(runs)
    print(text)
    drifted = [r for r in runs if r.drift]
    if files is not None:
        from harness.upstream.output import write_output

        summary = f"{len(runs) - len(drifted)} of {len(runs)} releases ran"
        upstream = [{"tree": r.version, "drift": r.drift} for r in runs]
        write_output(files, text + "\n", summary, upstream, info)
    if drifted:
        raise InputError("; ".join(f"sglang {r.version}: {r.drift}" for r in drifted))
    return 0
