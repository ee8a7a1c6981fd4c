"""`python -m harness notebooks [RUN]`: execute the plot notebooks headless against a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run", nargs="?", default=None, help="run folder (default: the newest complete run)"
    )
    p.add_argument("--root", type=Path, default=Path("results/runs"), help="where runs live")
    p.add_argument(
        "--out", type=Path, default=None, help="executed copies (default: RUN/notebooks)"
    )
    p.add_argument("--timeout", type=int, default=120, help="seconds per cell")


@command(
    "notebooks",
    help="execute notebooks/*.ipynb headless against a run (copies with outputs in RUN/notebooks)",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.errors import CheckFailed, InputError
    from harness.report import load_run
    from harness.report.notebooks import NOTEBOOKS, execute_all
    from harness.results.load import reading

    try:  # dev extras; a bare GPU box may lack them (report and trace do not need them)
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
    except ImportError as exc:
        raise InputError(f"needs nbclient and ipykernel (pip install -e '.[dev]'): {exc}") from exc

    # the notebooks load the run the same way; a bad table is exit 2 here, before any kernel
    data = load_run(args.run, root=args.root)
    out = args.out if args.out is not None else data.path / "notebooks"
    plan = reading(data)
    for name in NOTEBOOKS:  # before any kernel starts
        plan.write(out / name, "--out")
    failed = []
    for ex in execute_all(data.path, out, timeout_s=args.timeout):
        status = "ok" if ex.error is None else f"FAILED: {ex.error}"
        print(f"{ex.name}: {status} ({ex.seconds:.1f} s) -> {ex.path}")
        if ex.error is not None:
            failed.append(ex.name)
    if failed:
        raise CheckFailed(f"notebook(s) failed: {', '.join(failed)}")
    return 0
