"""What the ledger adds to one call: per recorded sync, per sync-free op and per region.

Each probe is one call repeated `calls` times in a timed loop (ns per call), once plain and once
under each ledger arm, the arms interleaved round by round (their order rotating) on one
intra-op thread; every round is kept, one row each. What an arm adds is the median over rounds
of its time minus the plain time of the same round, so drift between rounds cancels.

Probes: `.item()` of a one-element tensor (one recorded sync; the device idle), `x + 1` (a
sync-free op) and `region()` enter plus exit. Arms: a ledger open across the round, and on CUDA
the same ledger with its CUPTI detector paused (`ledger_without_cupti`). On CUDA the probes run
on the GPU, timed by the wall clock; `--device emu` (any machine) runs them on the emulated
device, timed by the thread's CPU time (see `clock_for`).

    python -m harness check record-cost --out DIR [--device cuda|emu] [--calls N] [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.checks.emulated_cost import one_intra_op_thread
from harness.checks.registry import check
from harness.results.files import result_files, write_dict_rows
from harness.results.meta import write_check_meta
from syncledger import SyncLedger, cupti, emulated_device_beside_gpu, region

Row = dict[str, object]
Call = Callable[[], object]
CALLS = 2000
ROUNDS = 7


@dataclass(frozen=True)
class Probe:
    """One call to time; `make(device)` builds its inputs and returns it."""

    name: str
    make: Callable[[torch.device], Call]


def _item(dev: torch.device) -> Call:
    x = torch.ones(1, device=dev)
    return lambda: x.item()  # looked up per call: the ledger's interceptor, once installed


def _sync_free_op(dev: torch.device) -> Call:
    x = torch.ones(1, device=dev)
    return lambda: x + 1


def _region(dev: torch.device) -> Call:
    def enter_exit() -> None:
        with region("r"):
            pass

    return enter_exit


PROBES = (
    Probe("item", _item),
    Probe("sync_free_op", _sync_free_op),
    Probe("region", _region),
)


@dataclass(frozen=True)
class Arm:
    name: str
    around: Callable[[], contextlib.AbstractContextManager[object]]


@contextlib.contextmanager
def _ledger_without_cupti() -> Iterator[None]:
    with cupti.paused(), SyncLedger():
        yield


def arms(on_cuda: bool) -> list[Arm]:
    out = [Arm("plain", contextlib.nullcontext), Arm("ledger", SyncLedger)]
    if on_cuda:
        out.append(Arm("ledger_without_cupti", _ledger_without_cupti))
    return out


@dataclass(frozen=True)
class Target:
    """The most an arm may add to a probe's call, in ns (the issue's done-when)."""

    probe: str
    arm: str
    device: str  # "cuda" or "emu"
    limit_ns: float


TARGETS = (
    Target("item", "ledger", "cuda", 5000.0),
    Target("item", "ledger", "emu", 3000.0),
)


def clock_for(dev: torch.device) -> Callable[[], int]:
    """Wall time on CUDA, where the host waits for the device; elsewhere this thread's CPU time,
    which a machine shared with other work leaves as it is (nothing there waits for a device)."""
    return time.perf_counter_ns if dev.type == "cuda" else time.thread_time_ns


def _per_call_ns(call: Call, n: int, clock: Callable[[], int]) -> float:
    t0 = clock()
    for _ in range(n):
        call()
    return (clock() - t0) / n


def probe_rows(dev: torch.device, calls: int = CALLS, rounds: int = ROUNDS) -> list[Row]:
    """ns per call of every probe under every arm, `rounds` interleaved rounds of `calls`."""
    on_cuda = dev.type == "cuda"
    kind = "cuda" if on_cuda else "emu"
    clock = clock_for(dev)
    rows: list[Row] = []
    with one_intra_op_thread():
        for probe in PROBES:
            call = probe.make(dev)
            every = arms(on_cuda)
            for r in range(rounds):
                for arm in every[r % len(every) :] + every[: r % len(every)]:
                    with arm.around():
                        call()  # a first call outside the timing (a ledger's first event)
                        value = _per_call_ns(call, calls, clock)
                    rows.append(
                        {
                            "device": kind,
                            "probe": probe.name,
                            "arm": arm.name,
                            "round": r,
                            "value": round(value, 1),
                            "unit": "ns",
                            "clock": clock.__name__,
                        }
                    )
    return rows


def added_ns(rows: list[Row], device: str, probe: str, arm: str) -> list[float]:
    """Per round: the arm's ns per call minus the plain ns per call of the same round."""
    by: dict[tuple[str, int], float] = {}
    for r in rows:
        if r["device"] == device and r["probe"] == probe:
            by[(str(r["arm"]), int(r["round"]))] = float(r["value"])  # type: ignore[arg-type]
    return [v - by[("plain", n)] for (a, n), v in sorted(by.items()) if a == arm]


def summary(rows: list[Row]) -> list[str]:
    """One line per (device, probe, arm): plain ns per call, and what the arm adds (median over
    rounds, with the rounds' range)."""
    lines = []
    keys = dict.fromkeys((str(r["device"]), str(r["probe"]), str(r["arm"])) for r in rows)
    for device, probe, arm in keys:
        if arm == "plain":
            continue
        plain = [
            float(r["value"])
            for r in rows
            if r["arm"] == "plain" and r["device"] == device and r["probe"] == probe
        ]  # type: ignore[arg-type]
        added = added_ns(rows, device, probe, arm)
        lines.append(
            f"{device:<5}{probe:<14}{arm:<22}plain {statistics.median(plain) / 1e3:7.2f} us  "
            f"added {statistics.median(added) / 1e3:+7.2f} us "
            f"(rounds {min(added) / 1e3:+.2f} to {max(added) / 1e3:+.2f})"
        )
    return lines


def target_verdicts(rows: list[Row]) -> list[tuple[Target, float | None, bool]]:
    """Each target with the median ns the arm added (None: not measured here) and whether met."""
    out = []
    for t in TARGETS:
        added = added_ns(rows, t.device, t.probe, t.arm)
        value = statistics.median(added) if added else None
        out.append((t, value, value is not None and value <= t.limit_ns))
    return out


def verdict_lines(rows: list[Row]) -> list[str]:
    lines = []
    for t, value, met in target_verdicts(rows):
        if value is not None:
            verdict = "met" if met else "MISSED"
            lines.append(
                f"{t.probe} under {t.arm} on {t.device}: {value / 1e3:+.2f} us per call "
                f"(target <= {t.limit_ns / 1e3:g} us) {verdict}"
            )
    return lines


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True, help="folder for the result files")
    ap.add_argument("--device", choices=("cuda", "emu"), default="emu")
    ap.add_argument("--calls", type=int, default=CALLS, help="calls per round")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds")


@check(
    "record-cost",
    "what the ledger adds per recorded sync, per sync-free op and per region",
    configure=_configure,
    in_all=False,
)
def run_check(args: argparse.Namespace) -> int:
    if args.device == "cuda" and not torch.cuda.is_available():
        print("record_cost: no CUDA device; nothing was run or written", file=sys.stderr)
        return 2
    files = result_files(args.out, ("record_cost.csv", "meta.json"))
    if args.device == "cuda":
        rows = probe_rows(torch.device("cuda"), args.calls, args.rounds)
    else:
        with emulated_device_beside_gpu() as dev:
            rows = probe_rows(dev, args.calls, args.rounds)
    write_dict_rows(files["record_cost.csv"], rows)
    write_check_meta(
        args.out,
        "record_cost",
        args.device,
        calls=args.calls,
        rounds=args.rounds,
        intra_op_threads=1,
        cupti=cupti.status(),
    )
    print("\n".join(summary(rows) + verdict_lines(rows)))
    return 0 if all(met for _t, v, met in target_verdicts(rows) if v is not None) else 1
