"""What the ledger costs on real programs: each program's step timed plain and under a
process-wide ledger opened for the call, interleaved, after a warm-up.

Per program (`harness.programs`): one untimed call of each kind, then `calls` pairs, a plain
call then a ledger call (one row per call, seconds; see `_clock` for how each is timed). On CUDA with CUPTI attached, each ledger call's syncs are held against the CUDA
driver's synchronizing calls during it: they must be equal. Outputs and syncs per site are the
real-programs suite's checks (`harness.checks.programs_gpu`, `make test`), not this one's:
a program's later calls need not repeat its first (a training step changes its model).

    python -m harness check programs-cost --out DIR [--device cuda|emu] [--calls N] [NAME ...]

Exit 1 when a program fails, its first call's syncs differ from the expectation or a ledger
call's from the driver's; the ratios to the target (RATIO_LIMIT) are reported, not gated.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.checks.emulated_cost import one_intra_op_thread
from harness.checks.registry import check
from harness.programs import suite
from harness.programs.registry import Program
from harness.results.files import result_files, write_dict_rows
from harness.results.meta import write_check_meta
from syncledger import SyncLedger, cupti

Row = dict[str, object]
Expected = dict[str, dict[str, Any]]
CALLS = 5
RATIO_LIMIT = 1.15  # a program's median call under the ledger, to its median plain call


@dataclass(frozen=True)
class _Clock:
    """How a call is timed: on CUDA the wall clock, the device finished before it stops; on
    the emulated device the process's CPU time, which other work on a shared machine leaves as
    it is (nothing there waits for a device)."""

    now: Callable[[], float]
    finish: Callable[[], None]


def _clock(kind: str) -> _Clock:
    if kind == "cuda":
        return _Clock(time.perf_counter, torch.cuda.synchronize)
    return _Clock(time.process_time, lambda: None)


def _plain(step: Callable[[], object], clock: _Clock) -> float:
    t0 = clock.now()
    step()
    clock.finish()
    return clock.now() - t0


def _ledger(step: Callable[[], object], clock: _Clock) -> tuple[float, Row, SyncLedger]:
    calls0 = cupti.driver_calls()
    t0 = clock.now()
    with SyncLedger(scope="process") as led:
        step()
        clock.finish()
    seconds = clock.now() - t0
    counts: Row = {"syncs": led.count()}
    if "cupti" in led.detectors:
        counts["driver_calls"] = cupti.driver_calls() - calls0
    return seconds, counts, led


def _row(base: Row, arm: str, call: int, seconds: float, **extra: object) -> Row:
    return {**base, "arm": arm, "call": call, "value": seconds, "unit": "s", **extra}


def program_rows(
    program: Program, kind: str, calls: int = CALLS, expected: Expected | None = None
) -> list[Row]:
    """One row per timed call of `program` on `kind`, plain and under the ledger, interleaved,
    after the suite's own first ledger call (arm "first": its syncs per site held against
    `expected`, the committed expectation by default); a program that raises gives one row
    naming the error."""
    known = suite.load_expected() if expected is None else expected
    want = suite.expected_syncs(known, program.name)
    base: Row = {"device": kind, "program": program.name}
    clock = _clock(kind)
    rows: list[Row] = []
    # on the emulated device, one intra-op thread: the process's CPU time is then the step's
    threads = one_intra_op_thread() if kind == "emu" else contextlib.nullcontext()
    with suite.on_device(kind), threads:
        try:
            _plain(program.prepare(suite.CUDA), clock)  # the libraries' first-call work
            step = program.prepare(suite.CUDA)  # then a fresh step's first call, as the suite's
            seconds, counts, led = _ledger(step, clock)
            sites = Counter(suite.site(e) for e in led.events if e.is_sync)
            as_expected = None if want is None else sites == want
            rows.append(_row(base, "first", 0, seconds, **counts, as_expected=as_expected))
            for call in range(calls):
                rows.append(_row(base, "plain", call, _plain(step, clock)))
                seconds, counts, _led = _ledger(step, clock)
                rows.append(_row(base, "ledger", call, seconds, **counts))
        except Exception as exc:
            return [{**base, "arm": "error", "error": f"{type(exc).__name__}: {exc}"}]
    return rows


def _seconds(rows: list[Row], program: str, arm: str) -> list[float]:
    return [float(r["value"]) for r in rows if (r["program"], r["arm"]) == (program, arm)]  # type: ignore[arg-type]


def ratio(rows: list[Row], program: str) -> float | None:
    """The program's median ledger call to its median plain call."""
    plain, ledger = _seconds(rows, program, "plain"), _seconds(rows, program, "ledger")
    if not plain or not ledger:
        return None
    return statistics.median(ledger) / statistics.median(plain)


def disagreements(rows: list[Row]) -> list[str]:
    """Programs that failed, or a ledger call whose syncs differ from the driver's."""
    bad = [f"{r['program']}: {r['error']}" for r in rows if r["arm"] == "error"]
    bad += [
        f"{r['program']} {r['arm']} call {r['call']}: "
        f"ledger {r['syncs']} syncs, driver {r['driver_calls']}"
        for r in rows
        if "driver_calls" in r and r["driver_calls"] != r["syncs"]
    ]
    bad += [
        f"{r['program']}: syncs per site differ from the expectation"
        for r in rows
        if r.get("as_expected") is False
    ]
    return bad


def summary(rows: list[Row]) -> list[str]:
    lines = [f"{'program':<28}{'plain ms':>10}{'ledger ms':>11}{'ratio':>8}  syncs/call"]
    for program in dict.fromkeys(str(r["program"]) for r in rows):
        mine = [r for r in rows if r["program"] == program]
        r = ratio(rows, program)
        if r is None:
            lines.append(f"{program:<28}  {mine[0].get('error', 'no timed calls')}")
            continue
        plain = statistics.median(_seconds(rows, program, "plain"))
        ledger = statistics.median(_seconds(rows, program, "ledger"))
        syncs = sorted({int(x["syncs"]) for x in mine if x["arm"] == "ledger"})  # type: ignore[call-overload]
        verdict = "" if r <= RATIO_LIMIT else f"  (over {RATIO_LIMIT}x)"
        lines.append(
            f"{program:<28}{plain * 1e3:>10.2f}{ledger * 1e3:>11.2f}{r:>7.2f}x  "
            f"{','.join(map(str, syncs))}{verdict}"
        )
    return lines


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True, help="folder for the result files")
    ap.add_argument("--device", choices=("cuda", "emu"), default="cuda")
    ap.add_argument("--calls", type=int, default=CALLS, help="timed calls of each kind")
    ap.add_argument("names", nargs="*", help="programs to time (default: all that load here)")


@check(
    "programs-cost",
    "each real program's time with and without the ledger, its syncs against the expectation and CUPTI",
    configure=_configure,
    in_all=True,
)
def run_check(args: argparse.Namespace) -> int:
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("programs_cost: no CUDA device; nothing was run or written", file=sys.stderr)
            return 2
        cupti.attach()
    files = result_files(args.out, ("programs_cost.csv", "meta.json"))
    chosen = [p for p in suite.runnable(args.device) if not args.names or p.name in args.names]
    rows: list[Row] = []
    for program in chosen:
        rows += program_rows(program, args.device, args.calls)
        # after each program: a run cut short keeps the programs it finished
        write_dict_rows(files["programs_cost.csv"], rows)
        print(f"{program.name}: timed", flush=True)
    write_check_meta(args.out, "programs_cost", args.device, calls=args.calls, cupti=cupti.status())
    bad = disagreements(rows)
    print("\n".join(summary(rows) + [f"DIFFER: {b}" for b in bad]))
    return 1 if bad else 0
