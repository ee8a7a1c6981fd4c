"""`make repeats-proof`: do answers survive a rerun? Three separate invocations of one scenario,
each with `--repeats N`, compared pairwise; every run's A/A arm; the half-width of each
variant's Δ against the reference.

Writes under --out: runs/ (the three run folders), bench_<i>.txt and compare_<i>_<j>.txt (what
the commands printed), and three tidy tables with a `meta.json`:
- pairs.csv: per pair of runs, cells compared, cells flagged different (Holm-corrected);
- aa.csv: per run and batch size, the A/A arm's Δ, its interval, the noise floor, flagged;
- deltas.csv: per run, batch size and variant, Δ against the reference, interval, half-width.

    python -m harness repeats-proof --out results/gpu/repeats_proof --device cuda
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
from pathlib import Path

from harness.results.compare import compare_runs, time_deltas
from harness.results.deltas import cell_rates, noise_floor, paired_delta
from harness.results.files import json_text, result_files, write_atomic
from harness.results.load import RunData, load_run
from harness.results.meta import utc_now
from harness.results.samples import headline_metric, step_times
from harness.results.tables import AA_ARM
from harness.runner.device import device_kind
from harness.scenario import load_scenario
from harness.variants import reference_variant

RUNS = 3
_VARIANT, _ARM, _BATCH = 2, 6, 4  # positions in a cell tuple (CELL_KEYS)


def _bench(args: argparse.Namespace, i: int) -> Path:
    """One invocation of bench, in its own interpreter like a user's; its run folder."""
    runs = args.out / "runs"
    before = set(runs.glob("*/*"))
    argv = [sys.executable, "-m", "harness", "bench", "--scenario", args.scenario]
    argv += ["--device", args.device, "--pass", "time", "--repeats", str(args.repeats)]
    argv += ["--out", str(runs), "--no-progress"]
    for s in args.set:
        argv += ["--set", s]
    out = subprocess.run(argv, capture_output=True, text=True)
    write_atomic(args.out / f"bench_{i}.txt", out.stdout + out.stderr)
    if out.returncode != 0:  # its exit code stands: 2 bad input, 3 the environment, ...
        print(
            f"bench run {i} failed (exit {out.returncode}); see {args.out}/bench_{i}.txt",
            file=sys.stderr,
        )
        raise SystemExit(out.returncode)
    (folder,) = set(runs.glob("*/*")) - before
    return folder


def _write_csv(path: Path, header: list[str], rows: list[tuple]) -> None:
    lines = [",".join(header)] + [",".join(str(v) for v in r) for r in rows]
    write_atomic(path, "\n".join(lines) + "\n")


def _within_run(i: int, run: RunData, reference: str) -> tuple[list[tuple], list[tuple]]:
    """The A/A rows and the Δ rows of one run."""
    steps = step_times(run.latency)
    rates = cell_rates(run.counts, steps, headline_metric(steps))
    refs = [c for c in rates if c[_VARIANT] == reference and c[_ARM] == ""]
    aa, deltas = [], []
    for ref in refs:
        twin = (*ref[:_ARM], AA_ARM)
        floor = float("nan")
        if twin in rates:
            ci = paired_delta(rates[ref], rates[twin])
            floor = noise_floor(ci)
            aa.append((i, ref[_BATCH], ci.estimate, ci.low, ci.high, floor, ci.excludes_zero))
        for c in rates:
            same_place = c[:_VARIANT] == ref[:_VARIANT] and c[_VARIANT + 1 :] == ref[_VARIANT + 1 :]
            if c == ref or not same_place or rates[c].times.empty:
                continue
            ci = paired_delta(rates[ref], rates[c])
            half = (ci.high - ci.low) / 2
            resolved = ci.excludes_zero and not abs(ci.estimate) <= floor  # NaN: no A/A arm
            deltas.append(
                (i, ref[_BATCH], c[_VARIANT], ci.estimate, ci.low, ci.high, half, resolved)
            )
    return aa, deltas


def prove(args: argparse.Namespace) -> int:
    """Three runs of `args.scenario` with `--repeats`, compared; the tables under `args.out`."""
    device_kind(args.device)  # a device this machine lacks: exit 2 before any run
    load_scenario(args.scenario, args.set)  # so is a bad scenario or --set
    pairs = itertools.combinations(range(RUNS), 2)
    names = [*(f"bench_{i}.txt" for i in range(RUNS)), *(f"compare_{i}_{j}.txt" for i, j in pairs)]
    result_files(args.out, [*names, "pairs.csv", "aa.csv", "deltas.csv", "meta.json"])
    folders = [_bench(args, i) for i in range(RUNS)]
    runs = [load_run(f) for f in folders]
    reference = reference_variant()
    pairs = []
    for (i, a), (j, b) in itertools.combinations(enumerate(runs), 2):
        write_atomic(args.out / f"compare_{i}_{j}.txt", compare_runs(a.path, b.path) + "\n")
        d = time_deltas(a, b)
        aa_flagged = sum(v for c, v in d.differs.items() if c[_ARM] == AA_ARM)
        pairs.append((i, j, len(d.differs), sum(d.differs.values()), aa_flagged))
    aa, deltas = [], []
    for i, run in enumerate(runs):
        a, d = _within_run(i, run, reference)
        aa += a
        deltas += d
    _write_csv(args.out / "pairs.csv", ["run_a", "run_b", "cells", "flagged", "aa_flagged"], pairs)
    aa_cols = ["run", "batch_size", "delta_us", "lo_us", "hi_us", "noise_floor_us", "flagged"]
    _write_csv(args.out / "aa.csv", aa_cols, aa)
    d_cols = ["run", "batch_size", "variant", "delta_us", "lo_us", "hi_us", "half_width_us"]
    _write_csv(args.out / "deltas.csv", [*d_cols, "resolved"], deltas)
    meta = {
        "written": utc_now(),
        "runs": [str(f) for f in folders],
        "command": " ".join(["python", "-m", "harness", *sys.argv[1:]]),
        "device_kind": runs[0].meta.get("device_kind"),
        "gpu_name": runs[0].meta.get("gpu_name"),
        "git_commit": runs[0].meta.get("git_commit"),
        "units": {"*_us": "µs"},
    }
    write_atomic(args.out / "meta.json", json_text(meta))
    for name in ("pairs.csv", "aa.csv", "deltas.csv"):
        print(f"{name}:\n{(args.out / name).read_text()}")
    print(f"A/A: {args.out / 'aa.csv'}; Δ against {reference}: {args.out / 'deltas.csv'}")
    return 0
