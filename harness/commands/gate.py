"""`python -m harness gate`: rerun every scenario's count pass; compare with the baselines."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.commands import command
from harness.errors import Interrupted, stop_signal
from harness.results.files import OutputPlan
from harness.scenario import LoadedScenario, scenario_names
from harness.scenario.loader import display_path
from syncledger.snapshot_verdict import Verdict


def configure_common(p: argparse.ArgumentParser) -> None:
    from harness.gate.baseline import DEFAULT_DIR
    from harness.runner.device import DEVICE_CHOICES

    p.add_argument(
        "--device",
        choices=DEVICE_CHOICES,
        default="emu",
        help="default: emu (the baselines are made on the emulated device)",
    )
    p.add_argument("--baselines", type=Path, default=DEFAULT_DIR, help=f"default: {DEFAULT_DIR}")
    p.add_argument(
        "--scenarios",
        nargs="+",
        metavar="NAME",
        help=f"default: every scenarios/*.yaml ({', '.join(scenario_names())}); "
        "sweeps (scenarios/sweeps/) are not gated",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def check_count_passes(loaded: list[LoadedScenario], device_kind: str) -> None:
    """Before any count pass: every scenario can run here (harness.runner.preflight)."""
    from harness.runner.preflight import check_single_rank

    for ls in loaded:
        check_single_rank(ls.scenario, "count", device_kind, display_path(ls.path))


def scenario_inputs(loaded: list[LoadedScenario]) -> OutputPlan:
    """A plan of the command's files, the scenario files it reads declared on it."""
    plan = OutputPlan()
    for ls in loaded:
        plan.read(ls.path, "--scenarios")
    return plan


def _configure(p: argparse.ArgumentParser) -> None:
    configure_common(p)
    p.add_argument(
        "--strict",
        action="store_true",
        help="any difference from the baselines fails (exit 1), fewer syncs too: CI's gate, "
        "so a detector that goes blind cannot pass",
    )
    p.add_argument(
        "--warn-only",
        action="store_true",
        help="report what would fail, and exit 0 (a new gate, not yet trusted)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="write the verdict as JSON")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML: a case per cell")
    p.add_argument(
        "--markdown",
        action="store_true",
        help="print the verdict as a Markdown table (for a PR comment) on stdout, the report "
        "on stderr",
    )


@command(
    "gate",
    help="compare every scenario's sync counts with results/baselines",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.gate.baseline import baseline_path
    from harness.gate.run import chosen_scenarios, run_gate
    from harness.runner.device import open_device
    from syncledger.snapshot_formats import markdown, outputs, write_outputs
    from syncledger.snapshot_verdict import Tier

    loaded = chosen_scenarios(args.scenarios)
    plan = scenario_inputs(loaded)
    for ls in loaded:
        plan.read(baseline_path(args.baselines, ls.name), "--baselines")
    # before the count passes, not after
    outs = outputs(args.json, args.junit, None, ("--json", "--junit", "--markdown"), plan)
    tier = Tier(strict=args.strict, warn_only=args.warn_only)
    report = sys.stderr if args.markdown else sys.stdout
    t0 = time.perf_counter()
    try:
        with open_device(args.device) as dh:
            check_count_passes(loaded, dh.kind)
            verdict = run_gate(
                loaded,
                args.baselines,
                dh,
                show_progress=False if args.no_progress else None,
                tier=tier,
                report=report,
            )
    except KeyboardInterrupt as exc:
        raise Interrupted(
            "the gate stopped before a verdict; it writes nothing", stop_signal(exc)
        ) from None
    write_outputs(verdict, outs)
    if args.markdown:
        print(markdown(verdict), end="")
    took = f"{time.perf_counter() - t0:.1f} s on device {dh.kind}"
    code, line = closing_line(verdict, args.strict, took)
    print(line, file=report)
    return code


def closing_line(verdict: Verdict, strict: bool, took: str) -> tuple[int, str]:
    """The gate's exit code and its last line (`took`: how long, on which device)."""
    failed = [s.name for s in verdict.suites if verdict.suite_status(s) == "failed"]
    if failed:
        regressed = any(s.regressions for s in verdict.suites)
        what = "regressions" if regressed else "differences (strict)"
        return 1, f"gate FAILED: {what} in {', '.join(failed)} ({took})"
    warned = [s.name for s in verdict.suites if verdict.suite_status(s) == "warned"]
    if warned:
        return 0, f"gate passed (warn-only): would fail in {', '.join(warned)} ({took})"
    rule = "the same counts and outcomes as" if strict else "no more syncs than"
    return 0, f"gate passed: {len(verdict.suites)} scenario(s), {rule} the baselines ({took})"
