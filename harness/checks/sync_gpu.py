"""`python -m harness check sync --out DIR`: the sync ledger against physics, on a GPU.

1. Every case of the planted-sync catalogue (`syncledger.catalogue`): the events the ledger
   recorded on CUDA (its syncs and kinds), the syncs the emulated device recorded, the profiler's
   count of the CUDA runtime's sync calls (a second opinion), and the physical verdict of the
   blocking oracle (`harness.checks.sync_oracle`): how many times the host waited. A case fails
   when the ledger's syncs differ from the waits, or the ledger's or the emulated device's
   events from the catalogue's.
2. The pageable staging threshold: the largest non_blocking copy from pageable host memory to
   the device that returns at once. It fails when it differs from the ledger's setting.
3. Host overheads (`harness.checks.sync_overhead`), with their targets (reported, not gated),
   measured before any profiler ran; the ledger with and without its CUPTI detector. And what
   the ledger adds to one call (`harness.checks.record_cost`): per recorded `.item()` (CUPTI
   attached and paused), per sync-free op, per region; on CUDA and on the emulated device.

The catalogue's cases on CUDA include syncs made inside a C++ extension
(`harness.checks.extension_cases`), which only the CUPTI detector sees.

Writes catalogue.csv, threshold.csv, overhead.csv, record_cost.csv (raw samples, one row each)
and meta.json into
--out, and prints a compact summary last. Exit 0 when everything agrees, 1 otherwise, 2 on a
machine without CUDA (before writing anything). `--device emu` is the smoke run for a machine
without a GPU: the catalogue on the emulated device, and the host overheads on CPU tensors.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import torch

from harness.checks import emulated_cost, record_cost, sync_oracle, sync_overhead
from harness.checks.registry import check
from harness.results.files import result_files, write_dict_rows
from harness.results.meta import write_check_meta
from syncledger import (
    NVTX_BACKEND,
    SyncKind,
    SyncLedger,
    cupti,
    emulated_device,
    emulated_device_beside_gpu,
    pageable_staging_bytes,
    region,
)
from syncledger.catalogue import CASES, Case, make_inputs

Row = dict[str, object]


def _kinds_text(counts: Mapping[SyncKind, int]) -> str:
    return " ".join(f"{k.value}={n}" for k, n in sorted(counts.items(), key=lambda kv: kv[0].value))


def _ready(case: Case, dev: torch.device) -> dict[str, torch.Tensor]:
    inputs = make_inputs(dev)
    if case.setup is not None:
        case.setup(inputs, dev)
    return inputs


def _ledger(case: Case, dev: torch.device) -> Counter[SyncKind]:
    inputs = _ready(case, dev)
    with SyncLedger() as led, region("check", case.name):
        case.body(inputs, dev)
    return Counter(e.kind for e in led.events)


def _syncs(kinds: Mapping[SyncKind, int]) -> int:
    return sum(n for k, n in kinds.items() if k.is_sync)


def _emulated_row(case: Case) -> Row:
    with emulated_device() as dev:
        seen = _ledger(case, dev)
    return {
        "emulated_syncs": _syncs(seen),
        "emulated_kinds": _kinds_text(seen),
        "emulated_ok": dict(seen) == dict(case.expected),
    }


def _cuda_row(case: Case, sleeper: sync_oracle.Sleeper) -> Row:
    dev = torch.device("cuda")
    # a library's first call initialises its handles and workspaces (cuSOLVER frees and
    # synchronizes then): those waits are not the case's, and the oracle only times later calls
    warm = _ready(case, dev)
    case.body(warm, dev)
    torch.cuda.synchronize()
    seen = _ledger(case, dev)

    def prepare() -> object:
        fresh = _ready(case, dev)
        return lambda: case.body(fresh, dev)

    verdict = sync_oracle.count_waits(prepare, sleeper)
    return {
        "ledger_syncs": _syncs(seen),
        "ledger_kinds": _kinds_text(seen),
        "ledger_kinds_ok": dict(seen) == dict(case.expected),
        "waits": verdict.waits,
        "wait_ratio": round(verdict.ratio, 3),
        "idle_ms": round(verdict.idle_ms, 3),
        "agrees_with_physics": _syncs(seen) == verdict.waits,
    }


def _profiler_row(case: Case) -> Row:
    from harness.checks.sync_profiler import count_runtime_syncs

    dev = torch.device("cuda")
    inputs = _ready(case, dev)

    def profiled() -> None:
        with region("check", case.name):
            case.body(inputs, dev)

    prof = count_runtime_syncs(profiled, regions=(f"check/{case.name}",))
    return {
        "profiler_syncs": prof.total,
        "profiler_calls": " ".join(f"{k}={n}" for k, n in sorted(prof.calls.items())),
    }


def check_catalogue(use_cuda: bool) -> list[Row]:
    sleeper = sync_oracle.Sleeper.calibrated() if use_cuda else None
    rows = [_case_row(case, sleeper) for case in CASES]
    if sleeper is None:
        return rows
    from harness.checks import extension_cases  # syncs inside C++: only CUPTI sees them

    extension = extension_cases.cases()
    rows += [_case_row(case, sleeper, emulated=False) for case in extension]
    # PyTorch's profiler keeps CUPTI's one subscriber once it has run, so the ledger's CUPTI
    # detector cannot subscribe again: the profiler's counts come after every ledger row
    for row, case in zip(rows, [*CASES, *extension], strict=True):
        row.update(_profiler_row(case))
    return rows


def _case_row(case: Case, sleeper: sync_oracle.Sleeper | None, emulated: bool = True) -> Row:
    row: Row = {
        "case": case.name,
        "measured_before": case.measured,
        "expected_syncs": case.syncs,
        "expected_kinds": _kinds_text(case.expected),
    }
    if sleeper is not None:
        row.update(_cuda_row(case, sleeper))
    if emulated:
        row.update(_emulated_row(case))
    checks = ("agrees_with_physics", "ledger_kinds_ok", "emulated_ok")
    row["ok"] = all(bool(row[k]) for k in checks if k in row)
    return row


def check_threshold() -> tuple[int | None, list[Row]]:
    sleeper = sync_oracle.Sleeper.calibrated()
    measured, tried = sync_oracle.staging_threshold(sleeper)
    rows: list[Row] = [
        {
            "nbytes": n,
            "waits": v.waits,
            "wait_ratio": round(v.ratio, 3),
            "idle_ms": round(v.idle_ms, 3),
        }
        for n, v in sorted(tried, key=lambda nv: nv[0])
    ]
    return measured, rows


# ---- printing -------------------------------------------------------------------------------


def _print_catalogue(rows: list[Row]) -> None:
    print(f"{'case':<40}{'expect':>7}{'ledger':>7}{'emu':>5}{'prof':>6}{'waits':>7}  ok")
    for r in rows:
        note = (
            ""
            if r["ok"]
            else f"  ledger {r.get('ledger_kinds', '-')}, emu {r.get('emulated_kinds', '-')}"
        )
        ratio = f"{r['waits']} ({r['wait_ratio']:.2f})" if "waits" in r else "-"
        print(
            f"{r['case']:<40}{r['expected_syncs']:>7}{r.get('ledger_syncs', '-')!s:>7}"
            f"{r.get('emulated_syncs', '-')!s:>5}{r.get('profiler_syncs', '-')!s:>6}{ratio:>12}  "
            f"{'yes' if r['ok'] else 'NO'}{note}"
        )


def _print_overhead(rows: list[Row], cupti_status: str) -> list[str]:
    """Print the overhead table; return one summary line per target. `cupti_status` is the CUPTI
    detector's state when the host configurations were timed: a profiler run later takes CUPTI's
    one subscriber, so the state at printing time says nothing of those rows."""
    med = sync_overhead.median
    base = med(rows, "plain") or float("nan")
    print(f"\nhost time per step (median, configurations interleaved), nvtx {NVTX_BACKEND}:")
    for config in sync_overhead.STEP_CONFIGS:
        m = med(rows, config)
        if m is not None:
            print(f"  {config:<24}{m / 1e3:9.1f} us {m / base:6.2f}x")
    post = med(rows, "profiler_postprocess_per_step")
    if post is not None:
        print(f"  profiler post-processing per step {post / 1e3:.1f} us ({post / base:.1f}x)")
        print("  (the profiler rows ran after the catalogue, once CUPTI was attached)")
    cupti_on, cupti_off = med(rows, "ledger_across_steps"), med(rows, "ledger_without_cupti")
    if cupti_on and cupti_off:
        print(f"  the CUPTI detector's own share: {cupti_on / cupti_off:.2f}x ({cupti_status})")
    for name in ("region_enter_exit", "ledger_open_close"):
        m = med(rows, name)
        if m is not None:
            print(f"  {name}: {m:.0f} ns")
    if med(rows, "emulated_device") is not None:
        print("  the emulated device's step:")
        print("\n".join(f"    {line}" for line in emulated_cost.summary(rows)))
    lines = []
    for target, value, met in sync_overhead.target_verdicts(rows):
        unit = "x" if target.unit == "x" else " ns"
        shown = "-" if value is None else f"{value:.2f}{unit}"
        verdict = "met" if met else "MISSED"
        lines.append(f"{target.config}: {shown} (target <= {target.limit:g}{unit}) {verdict}")
    return lines


def _summary(cat: list[Row], threshold: tuple[int | None, int] | None, targets: list[str]) -> bool:
    bad = [str(r["case"]) for r in cat if not r["ok"]]
    confirmed = sum(1 for r in cat if not r["measured_before"] and r["ok"])
    ok = not bad
    print("\n== sync ledger check ==")
    print(f"catalogue: {len(cat) - len(bad)}/{len(cat)} cases agree", end="")
    print(
        f" ({confirmed} hypotheses confirmed)" if "waits" in cat[0] else " (emulated device only)"
    )
    if bad:
        print(f"  disagree: {', '.join(bad)}")
    if threshold is not None:
        measured, configured = threshold
        agree = measured == configured
        ok = ok and agree
        print(
            f"pageable staging threshold: measured {measured} B, ledger {configured} B "
            f"{'agree' if agree else f'DIFFER (set SYNCLEDGER_PAGEABLE_STAGING_BYTES={measured})'}"
        )
    for line in targets:
        print(f"overhead {line}")
    print("result:", "ok" if ok else "FAILED")
    return ok


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True, help="folder for the result files")
    ap.add_argument("--device", choices=("cuda", "emu"), default="cuda")
    ap.add_argument("--steps", type=int, default=300, help="timed steps per configuration")


@check(
    "sync",
    "the sync ledger against physics (the catalogue behind a sleeping GPU), the staging threshold and the ledger's own cost",
    configure=_configure,
    in_all=True,
)
def run_check(args: argparse.Namespace) -> int:
    use_cuda = args.device == "cuda"
    if use_cuda and not torch.cuda.is_available():
        print(
            "sync_gpu: no CUDA device on this machine; nothing was run or written", file=sys.stderr
        )
        return 2
    names = (
        "catalogue.csv",
        "overhead.csv",
        "record_cost.csv",
        "meta.json",
        *(("threshold.csv",) if use_cuda else ()),
    )
    files = result_files(args.out, names)
    dev = torch.device("cuda" if use_cuda else "cpu")
    # overheads first: installing the interceptors and attaching a profiler are for good
    overhead = sync_overhead.step_overhead(dev, args.steps)
    cupti_at_overhead = cupti.status()
    overhead += sync_overhead.enter_exit_costs()
    overhead += emulated_cost.cost_rows(min(args.steps, 100))
    per_call = record_cost.probe_rows(dev) if use_cuda else []
    with emulated_device_beside_gpu() as emu:
        per_call += record_cost.probe_rows(emu)
    write_dict_rows(files["record_cost.csv"], per_call)

    cat = check_catalogue(use_cuda)
    _print_catalogue(cat)
    write_dict_rows(files["catalogue.csv"], cat)
    threshold = None
    extra: dict[str, object] = {
        "ledger_staging_bytes": pageable_staging_bytes(),
        "cupti_status_overhead": cupti_at_overhead,
    }
    if use_cuda:
        measured, tried = check_threshold()
        write_dict_rows(files["threshold.csv"], tried)
        threshold = (measured, pageable_staging_bytes())
        extra.update(measured_staging_bytes=measured, sleep_ms=sync_oracle.SLEEP_MS)
        overhead += sync_overhead.profiler_overhead(args.steps)
    write_dict_rows(files["overhead.csv"], overhead)
    targets = _print_overhead(overhead, cupti_at_overhead)
    print("\nwhat the ledger adds to one call (median over interleaved rounds):")
    print("\n".join(f"  {line}" for line in record_cost.summary(per_call)))
    targets += record_cost.verdict_lines(per_call)
    kind = "cuda" if use_cuda else "emu"
    write_check_meta(
        args.out, "sync_gpu", kind, nvtx_backend=NVTX_BACKEND, steps=args.steps, **extra
    )
    return 0 if _summary(cat, threshold, targets) else 1
