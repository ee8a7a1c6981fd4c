"""`python -m harness report [RUN]`: PNG figures of a run folder into RUN/plots/."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="run folder (default: the newest complete run); several runs of different "
        "scenarios are drawn side by side (then --out is required)",
    )
    p.add_argument("--root", type=Path, default=Path("results/runs"), help="where runs live")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: RUN/plots)")


@command(
    "report", help="write the run's figures as PNG files into RUN/plots/", configure=_configure
)
def run(args: argparse.Namespace) -> int:
    # Imported here: matplotlib and pandas are not needed by the other commands' start-up.
    from harness.errors import InputError
    from harness.report import combine_runs, load_run, write_report
    from harness.report.figures import figures_of
    from harness.results.load import reading

    if len(args.runs) > 1 and args.out is None:
        raise InputError("several runs need --out (where the plots go)", key="--out")
    data = combine_runs([load_run(r, root=args.root) for r in args.runs or [None]])
    out = args.out if args.out is not None else data.path / "plots"
    plan = reading(data)
    plan.folder(out, "--out")
    for stem in figures_of(data):  # before any figure is drawn
        plan.write(out / f"{stem}.png", "--out")
    report = write_report(data, out)
    print(f"report of {data.label}:")
    for path in report.written:
        print(f"  {path}")
    for note in report.notes():
        print(note)
    return 0
