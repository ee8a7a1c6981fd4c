"""GPU check: the lifecycle's sync sites on CUDA sync as on the emulated device, site by site
(each occasional site's syncs per 1,000 steps, each steady site's per step).

    python -m harness check lifecycle [--scenario sweeps/lifecycle_long ...] [--out DIR]

Per scenario (default: both long lifecycle scenarios) the count pass runs on CUDA, then on the
emulated device, each into a run folder under DIR (default results/runs); the two runs' site
rates are compared. Prints both folders, every failed cell and every site that differs;
writes ``lifecycle_rates.csv`` (the CUDA run's rates beside the emulated one's) to DIR. Exit 0
when every cell ran and every site agrees, 1 otherwise, 2 without CUDA or on a bad scenario.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from harness.checks.registry import check
from harness.errors import InputError
from harness.lifecycle.rates import KEY, rate_differences, site_rates
from harness.results.files import result_files, write_atomic
from harness.results.load import load_run

LONG = ["sweeps/lifecycle_long", "sweeps/lifecycle_specv2_long"]


def run_rates(name: str, device: str, out: Path) -> tuple[Path, pd.DataFrame, list[str]]:
    """One count pass of a scenario on a device: its run folder, its site rates and its cells
    that failed (a line each)."""
    from harness.runner.bench import run_bench
    from harness.runner.device import open_device
    from harness.scenario import load_scenario

    loaded = load_scenario(name)
    with open_device(device) as dh:
        folder = run_bench(loaded, dh, "count", out).path
    run = load_run(folder)
    bad = run.outcomes[run.outcomes["status"] != "ok"]
    failed = [f"{r.variant}/bs={r.batch_size}: {r.exception} {r.message}" for r in bad.itertuples()]
    return folder, site_rates(run.counts, run.syncs), failed


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--scenario", action="append", help="a lifecycle scenario (repeatable)")
    ap.add_argument("--out", type=Path, default=Path("results/runs"))


@check(
    "lifecycle",
    "the request lifecycle's sync sites on CUDA against the emulated device, site by site",
    configure=_configure,
    in_all=True,
    needs_cuda=True,
)
def run_check(args: argparse.Namespace) -> int:
    rates_csv = result_files(args.out, ("lifecycle_rates.csv",))["lifecycle_rates.csv"]
    tables, failed = [], False
    for name in args.scenario or LONG:
        try:
            cuda_folder, on_cuda, cuda_failed = run_rates(name, "cuda", args.out)
            emu_folder, on_emu, emu_failed = run_rates(name, "emu", args.out)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        diff = rate_differences(on_cuda, on_emu)
        print(f"{name}: CUDA {cuda_folder}, emulated {emu_folder}")
        for device, lines in (("CUDA", cuda_failed), ("emulated", emu_failed)):
            failed = failed or bool(lines)
            print("".join(f"  failed cell on {device}: {line}\n" for line in lines), end="")
        if diff.empty:
            print(f"  every site agrees ({len(on_cuda)} sites)")
        else:
            failed = True
            print("  sites that differ (_a CUDA, _b emulated):")
            print(diff.to_string(index=False))
        tables.append(on_cuda.merge(on_emu, on=KEY, how="outer", suffixes=("_cuda", "_emu")))
    write_atomic(rates_csv, pd.concat(tables).to_csv(index=False))
    print(f"{'FAIL' if failed else 'PASS'}: {args.out / 'lifecycle_rates.csv'}")
    return 1 if failed else 0
