"""`python -m harness bench`: run a scenario, write a run folder, print the summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import command
from harness.scenario import LoadedScenario, known_scenarios, load_scenario


def _configure(p: argparse.ArgumentParser) -> None:
    from harness.runner.bench import PASSES
    from harness.runner.device import DEVICE_CHOICES

    p.add_argument(
        "--scenario",
        required=True,
        help=f"NAME (scenarios/NAME.yaml: {', '.join(known_scenarios())}) or PATH",
    )
    p.add_argument("--device", choices=DEVICE_CHOICES, default="auto", help="default: auto")
    p.add_argument(
        "--pass",
        dest="which",
        choices=PASSES,
        default=None,
        help="default: both; count for a sweep (scenarios/sweeps/) on the emulated device",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key (dotted, YAML value), e.g. --set steps.count=4",
    )
    p.add_argument(
        "--repeats",
        type=_repeats,
        default=1,
        metavar="N",
        help="run the passes in N fresh worker processes (intervals between processes); "
        "default 1: in this process",
    )
    p.add_argument("--out", type=Path, default=Path("results/runs"), help="runs root folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _repeats(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (1 or more)")
    return n


@command(
    "bench", help="run a scenario's count and time passes into a run folder", configure=_configure
)
def run(args: argparse.Namespace) -> int:
    from harness.runner.cells import runner_part

    loaded = load_scenario(args.scenario, args.overrides)  # bad input: exit 2, nothing written
    launch = runner_part(loaded.scenario).launch
    if launch is not None:  # the world runs its cells in processes of its own (DP's ranks)
        if args.repeats > 1:
            from harness.errors import InputError

            raise InputError(
                f"world {loaded.scenario.world!r} runs its cells in processes of its own (one "
                "launch); run the command N times and compare the runs instead",
                file=str(loaded.path),
                key="--repeats",
            )
        return launch(loaded, args.device, args.which, args.out)
    return bench_here(loaded, args)


def bench_here(loaded: LoadedScenario, args: argparse.Namespace) -> int:
    """The scenario's passes in this process, then the summary."""
    from harness.errors import CheckFailed
    from harness.results.files import check_writable
    from harness.results.summary import format_summary
    from harness.runner.bench import chosen_pass, run_bench
    from harness.runner.device import open_device
    from harness.runner.preflight import check_single_rank
    from harness.scenario.loader import display_path

    with open_device(args.device) as dh:
        which, why = chosen_pass(loaded, dh.kind, args.which)
        check_single_rank(loaded.scenario, which, dh.kind, display_path(loaded.path))
        check_writable(args.out, "--out")  # after every input check, before any pass
        print(
            f"scenario {loaded.name} on device {dh.kind}"
            + (" (emulated: host times only)" if dh.kind == "emu" else ""),
            file=sys.stderr,
        )
        if why:
            print(why, file=sys.stderr)
        folder = run_bench(
            loaded,
            dh,
            which,
            args.out,
            show_progress=False if args.no_progress else None,
            repeats=args.repeats,
        )
    print(format_summary(folder.path))
    failed = folder.meta.get("failed_cells", 0)
    tail = f"; {failed} cell(s) failed, see outcomes.csv" if failed else ""
    print(f"\nrun folder: {folder.path} (device {dh.kind}){tail}")
    if "every_cell_failed" in folder.meta:
        raise CheckFailed(f"{folder.meta['every_cell_failed']} (run folder {folder.path})")
    return 0
