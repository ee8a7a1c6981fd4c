"""`python -m harness bench`: run a scenario, write a run folder, print the summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands import command

if TYPE_CHECKING:
    from harness.runner.auto_repeats import Repeats
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
        metavar="N|auto",
        help="run the passes in N fresh worker processes (intervals between processes); "
        "auto: add processes until --half-width is reached or --budget runs out; "
        "default 1: in this process",
    )
    p.add_argument(
        "--half-width",
        type=_microseconds,
        default=None,
        metavar="US",
        help="the target of --repeats auto (implies it): every named Δ's 95%% half-width, "
        "e.g. 25us",
    )
    p.add_argument(
        "--delta",
        dest="deltas",
        action="append",
        default=[],
        metavar="VARIANT[:BATCH]",
        help="a Δ against the reference to sharpen (repeatable; default: every variant's), "
        "e.g. dropped:4",
    )
    p.add_argument(
        "--budget",
        type=_seconds,
        default=600.0,
        metavar="TIME",
        help="--repeats auto starts no process that would end past it, e.g. 6min; default 10min",
    )
    p.add_argument(
        "--most", type=_processes, default=100, metavar="N", help="--repeats auto: at most N"
    )
    p.add_argument(
        "--aa",
        choices=("reference", "every"),
        default="reference",
        help="A/A arms in the time pass: a twin of the reference's cells (default) or of every "
        "cell (more A/A verdicts, for their false-positive rate)",
    )
    p.add_argument(
        "--against",
        default=None,
        metavar="REF",
        help="also run the same cells in another tree of the harness (a git revision, or a "
        "folder holding one), in interleaved worker processes (A B, B A, …; --repeats pairs), "
        "and compare B with A paired by pair",
    )
    p.add_argument("--out", type=Path, default=Path("results/runs"), help="runs root folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_S = {"s": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


def _quantity(text: str, units: dict[str, float], what: str) -> float:
    """'25us', '1.5ms', '6min', or a bare number in the first unit."""
    number = text.rstrip("".join(sorted({c for u in units for c in u})))
    unit = text[len(number) :] or next(iter(units))
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError):
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} ({', '.join(units)})")
    return value


def _microseconds(text: str) -> float:
    return _quantity(text, _US, "a positive time")


def _seconds(text: str) -> float:
    return _quantity(text, _S, "a positive time")


def _repeats(text: str) -> int | str:
    return text if text == "auto" else _processes(text)


def _processes(text: str) -> int:
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
        if args.repeats != 1 or args.half_width is not None or args.against:
            from harness.errors import InputError

            raise InputError(
                f"world {loaded.scenario.world!r} runs its cells in processes of its own (one "
                "launch); run the command N times and compare the runs instead",
                file=str(loaded.path),
                key="--repeats",
            )
        return launch(loaded, args.device, args.which, args.out)
    if args.against:
        return against_here(loaded, args)
    return bench_here(loaded, args)


def repeat_policy(args: argparse.Namespace, loaded: LoadedScenario) -> Repeats:
    """--repeats N, or auto with its target, budget and Δs (one-line errors, exit 2)."""
    from harness.errors import InputError
    from harness.results.precision import DeltaName
    from harness.runner.auto_repeats import Repeats
    from harness.runner.cells import cells

    auto = args.repeats == "auto" or args.half_width is not None
    if not auto:
        if args.deltas:
            raise InputError("--delta names what --repeats auto sharpens", key="--delta")
        return Repeats(args.repeats)
    if args.half_width is None:
        raise InputError(
            "--repeats auto needs its target: --half-width, e.g. 25us", key="--repeats"
        )
    if args.repeats not in ("auto", 1):
        raise InputError("--half-width asks for --repeats auto, not a number", key="--repeats")
    deltas = tuple(DeltaName.parse(d) for d in args.deltas)
    sc = loaded.scenario
    keys = [c.key(sc.name) for c in cells(sc)]
    unknown = [str(d) for d in deltas if not any(d.matches(k) for k in keys)]
    if unknown:
        raise InputError(
            f"{', '.join(unknown)}: no cell of the scenario has it",
            file=str(loaded.path),
            key="--delta",
        )
    return Repeats(args.most, args.half_width, args.budget, deltas)


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
            repeats=repeat_policy(args, loaded),
            aa_every=args.aa == "every",
        )
    print(format_summary(folder.path))
    failed = folder.meta.get("failed_cells", 0)
    tail = f"; {failed} cell(s) failed, see outcomes.csv" if failed else ""
    print(f"\nrun folder: {folder.path} (device {dh.kind}){tail}")
    if "every_cell_failed" in folder.meta:
        raise CheckFailed(f"{folder.meta['every_cell_failed']} (run folder {folder.path})")
    return 0


def against_here(loaded: LoadedScenario, args: argparse.Namespace) -> int:
    """`--against REF`: both sides' run folders, then B against A, paired by pair."""
    from harness import registry
    from harness.results.compare import compare_runs
    from harness.results.files import check_writable
    from harness.results.load import load_run
    from harness.results.meta import reproduce_command
    from harness.results.precision import across_trees, half_width, within_run
    from harness.results.vocabulary import ResultsPart
    from harness.runner.against import against
    from harness.runner.bench import step_frame
    from harness.runner.device import device_kind

    kind = device_kind(args.device)
    check_writable(args.out, "--out")
    repeats = repeat_policy(args, loaded)
    argv = ["--scenario", str(loaded.path.resolve()), "--device", kind]
    for o in loaded.overrides:
        argv += ["--set", o]
    if args.aa == "every":
        argv += ["--aa", "every"]

    def widths(sides) -> dict[str, float]:
        lat = [step_frame(sides.rows[s]) for s in ("A", "B")]
        return {k: half_width(ci) for k, ci in across_trees(*lat, repeats.deltas).items()}

    print(f"scenario {loaded.name} on device {kind}, against {args.against}", file=sys.stderr)
    a, b, _why = against(
        loaded, args.against, argv, args.which or "both", args.out, repeats, widths,
        reproduce_command(),
    )  # fmt: skip
    print(compare_runs(a.path, b.path))
    run_a, run_b = load_run(a.path), load_run(b.path)
    between = across_trees(run_a.latency, run_b.latency, repeats.deltas)
    part = registry.world(loaded.scenario.world).part(ResultsPart)
    reference = part.vocabulary.reference if part is not None else None
    within = within_run(run_a.latency, reference, ()) if reference else {}
    print("\nHalf-widths, µs: B − A of each cell (pairs) beside the Δs inside A (same processes):")
    for name, ci in between.items():
        print(f"  {name}: B − A ±{half_width(ci):.1f}")
    for name, ci in within.items():
        print(f"  {name} vs {reference}, inside A: ±{half_width(ci):.1f}")
    print(f"\nrun folders: {a.path} (A: this checkout), {b.path} (B: {args.against})")
    return 0
