"""`python -m harness trace [RUN] [-o FILE]`: a Chrome/Perfetto trace JSON of a run's steps."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run", nargs="?", default=None, help="run folder (default: the newest complete run)"
    )
    p.add_argument("--root", type=Path, default=Path("results/runs"), help="where runs live")
    p.add_argument(
        "-o", "--output", type=Path, default=None, help="trace file (default: RUN/trace.json)"
    )
    p.add_argument(
        "--max-steps", type=int, default=None, help="first N measured steps per cell (default: all)"
    )


@command(
    "trace",
    help="write a Perfetto/Chrome trace JSON of a run (ui.perfetto.dev)",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.errors import InputError
    from harness.report import load_run
    from harness.report.trace import build_trace
    from harness.results.files import write_atomic
    from harness.results.load import reading

    if args.max_steps is not None and args.max_steps < 1:
        raise InputError("must be at least 1", key="--max-steps")
    data = load_run(args.run, root=args.root)
    target = args.output or data.path / "trace.json"
    out = reading(data).write(target, "--output")  # before the trace is built
    trace = build_trace(data, max_steps=args.max_steps)
    write_atomic(out, json.dumps(trace, separators=(",", ":")))
    other = trace["otherData"]
    print(f"wrote {target}: {len(trace['traceEvents'])} events, {other['syncs_placed']} syncs")
    print(f"  region layout: {other['region_layout']}")
    print("  open it in https://ui.perfetto.dev (Open trace file)")
    return 0
