"""`python -m harness gate`: rerun every scenario's count pass; compare with the baselines."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.cli import command
from harness.gate.baseline import DEFAULT_DIR
from harness.gate.run import chosen_scenarios, run_gate
from harness.runner.device import DEVICE_CHOICES, open_device


def configure_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        choices=DEVICE_CHOICES,
        default="emu",
        help="default: emu (the baselines are made on the emulated device)",
    )
    p.add_argument("--baselines", type=Path, default=DEFAULT_DIR, help=f"default: {DEFAULT_DIR}")
    p.add_argument("--scenarios", nargs="+", metavar="NAME", help="default: every scenarios/*.yaml")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


@command(
    "gate",
    help="compare every scenario's sync counts with results/baselines (exit 1 on more syncs)",
    configure=configure_common,
)
def run(args: argparse.Namespace) -> int:
    loaded = chosen_scenarios(args.scenarios)
    t0 = time.perf_counter()
    with open_device(args.device) as dh:
        results = run_gate(
            loaded, args.baselines, dh, show_progress=False if args.no_progress else None
        )
    failed = [r.scenario for r in results if r.failed]
    took = f"{time.perf_counter() - t0:.1f} s on device {dh.kind}"
    if failed:
        print(f"gate FAILED: regressions in {', '.join(failed)} ({took})")
        return 1
    print(f"gate passed: {len(results)} scenario(s), no more syncs than the baselines ({took})")
    return 0
