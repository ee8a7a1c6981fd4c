"""`python -m harness.sync.gpucheck`: the ledger against the profiler, and what instruments cost.

1. The planted-sync catalogue: per pattern, the expected syncs, what the ledger saw and (on CUDA)
   what the profiler saw of the CUDA runtime's sync calls. They must agree.
2. Overhead on a metadata-sized step (a few dozen small tensor ops, three regions): host time
   per step uninstrumented, with regions only, with the ledger, with PyTorch's sync debug mode
   and a warnings hook, and under the profiler with CUDA activities (plus its post-processing).
3. The emulated device's slowdown over plain CPU tensors on the same step.

Writes catalogue.csv, overhead.csv (raw samples, one row each) and meta.json into --out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from harness.sync import catalogue
from harness.sync.emulated import emulated_device
from harness.sync.ledger import SyncLedger
from harness.sync.nvtx_ranges import BACKEND
from harness.sync.regions import region


def _check_catalogue(dev: torch.device, use_profiler: bool) -> list[dict[str, object]]:
    rows = []
    for p in catalogue.PATTERNS:
        inputs = catalogue.make_inputs(dev)
        _sync_all(dev)
        with SyncLedger() as led, region(f"check/{p.name}"):
            p.body(inputs, dev)
        seen = Counter(e.kind for e in led.events)
        row: dict[str, object] = {
            "pattern": p.name,
            "expected": p.total,
            "expected_kinds": " ".join(f"{k.value}={n}" for k, n in sorted(p.expected.items())),
            "ledger": len(led.events),
            "ledger_kinds": " ".join(f"{k.value}={n}" for k, n in sorted(seen.items())),
            "ledger_ok": dict(seen) == p.expected,
        }
        if use_profiler:
            from harness.sync.profiler_check import count_runtime_syncs

            fresh = catalogue.make_inputs(dev)

            def body(p: catalogue.Pattern = p, inputs: dict = fresh) -> None:
                with region(f"check/{p.name}"):
                    p.body(inputs, dev)

            prof = count_runtime_syncs(body, regions=(f"check/{p.name}",))
            row["profiler"] = prof.total
            row["profiler_calls"] = " ".join(f"{k}={n}" for k, n in sorted(prof.calls.items()))
            row["agree"] = prof.total == len(led.events)
        rows.append(row)
    return rows


def _sync_all(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def metadata_step(
    dev: torch.device, bs: int = 64, ctx: int = 4096
) -> Callable[[Callable[[str], object]], None]:
    """A sync-free step shaped like the metadata paths: gathers, clamps, masks, copies."""
    g = torch.Generator().manual_seed(0)
    seq_lens = torch.randint(1, ctx, (bs,), generator=g, dtype=torch.int32).to(dev)
    req_to_token = torch.arange(bs * ctx, dtype=torch.int32).view(bs, ctx).to(dev)
    pool_idx = torch.randperm(bs, generator=g).to(dev)
    out_loc = torch.randint(0, bs * ctx, (bs,), generator=g).to(dev)
    full_to_swa = torch.arange(bs * ctx, dtype=torch.int64).remainder(bs * 128).to(dev)
    dst = torch.zeros(bs, dtype=torch.int32, device=dev)
    cols = torch.arange(128, device=dev)

    def step(mark: Callable[[str], object]) -> None:
        with mark("step"):
            with mark("metadata/out_graph"):
                lens = seq_lens.clamp(min=1)
                dst.copy_(lens)
                pos = lens - 1
                loc = out_loc % (bs * ctx)
            with mark("metadata/in_graph"):
                pages = req_to_token[pool_idx][:, ::256] // 256
                win = pos.unsqueeze(1) - cols.unsqueeze(0)
                valid = win >= 0
                slots = req_to_token[pool_idx].gather(1, win.clamp(min=0))
                swa = torch.where(valid, full_to_swa[slots.long()], -1).to(torch.int32)
                swa_len = lens.clamp(max=128)
                for r in (4, 128):
                    raw = lens // r
                    clamp1 = raw.clamp(min=1)
                    c_loc = torch.where(lens % r == 0, loc // r, 0)
                    del raw, clamp1, c_loc
                topk = torch.minimum(lens // 4, torch.full_like(lens, 512))
                sched = torch.cumsum(topk, 0)
                swa_out = full_to_swa[loc]
                del pages, swa, swa_len, sched, swa_out

    return step


def _null_mark(name: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def _time_steps(
    step: Callable[[Callable[[str], object]], None],
    mark: Callable[[str], object],
    dev: torch.device,
    n: int,
) -> list[int]:
    for _ in range(10):
        step(mark)
    _sync_all(dev)
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        step(mark)
        out.append(time.perf_counter_ns() - t0)
    _sync_all(dev)
    return out


@contextlib.contextmanager
def _sync_debug_warn() -> Iterator[None]:
    seen: list[object] = []
    saved = warnings.showwarning
    mode = torch.cuda.get_sync_debug_mode()
    warnings.showwarning = lambda *a, **k: seen.append(a)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(mode)
        warnings.showwarning = saved


@contextlib.contextmanager
def _profiling(post_ns: list[int]) -> Iterator[None]:
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        yield
    t0 = time.perf_counter_ns()
    prof.key_averages()
    post_ns.append(time.perf_counter_ns() - t0)


def _overhead(dev: torch.device, n: int, rounds: int = 6) -> list[dict[str, object]]:
    """Configurations interleaved round by round, so drift (clocks, caches) hits all alike."""
    step = metadata_step(dev)
    post_ns: list[int] = []
    configs: list[
        tuple[str, Callable[[], contextlib.AbstractContextManager[object]], Callable[[str], object]]
    ] = [
        ("plain", contextlib.nullcontext, _null_mark),
        ("regions", contextlib.nullcontext, region),
        ("ledger", SyncLedger, region),
    ]
    if dev.type == "cuda":
        configs += [
            ("sync_debug_warn", _sync_debug_warn, _null_mark),
            ("profiler_loop", lambda: _profiling(post_ns), region),
        ]
    samples: dict[str, list[int]] = {name: [] for name, _, _ in configs}
    per_round = max(1, n // rounds)
    for r in range(rounds):
        for name, ctx, mark in configs[r % len(configs) :] + configs[: r % len(configs)]:
            with ctx():
                samples[name] += _time_steps(step, mark, dev, per_round)
    rows: list[dict[str, object]] = []
    for name, values in samples.items():
        rows.extend(
            {"config": name, "sample": i, "value": v, "unit": "ns"} for i, v in enumerate(values)
        )
    steps_per_profile = per_round + 10  # _time_steps warms up 10 steps
    rows.extend(
        {
            "config": "profiler_postprocess_per_step",
            "sample": i,
            "value": v // steps_per_profile,
            "unit": "ns",
        }
        for i, v in enumerate(post_ns)
    )
    rows.extend(
        {"config": "region_enter_exit", "sample": i, "value": v, "unit": "ns"}
        for i, v in enumerate(_region_cost())
    )
    return rows


def _region_cost(n: int = 200_000, reps: int = 5) -> list[int]:
    """Host ns per `with region(...)` enter+exit with no ledger, minus the bare loop."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            with contextlib.nullcontext():
                pass
        t1 = time.perf_counter_ns()
        for _ in range(n):
            with region("r"):
                pass
        t2 = time.perf_counter_ns()
        out.append(max(0, ((t2 - t1) - (t1 - t0)) // n))
    return out


def _emu_slowdown(n: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    cpu = torch.device("cpu")
    plain = _time_steps(metadata_step(cpu), region, cpu, n)
    with emulated_device() as dev:
        emu = _time_steps(metadata_step(dev), region, dev, n)
    for name, samples in (("cpu_tensors", plain), ("emulated_device", emu)):
        rows.extend(
            {"config": name, "sample": i, "value": v, "unit": "ns"} for i, v in enumerate(samples)
        )
    return rows


def _write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    import csv

    if not rows:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def _median(rows: list[dict[str, object]], config: str) -> float:
    vals = [float(r["value"]) for r in rows if r["config"] == config]  # type: ignore[arg-type]
    return statistics.median(vals) if vals else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.sync.gpucheck", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results/gpucheck"))
    ap.add_argument("--device", choices=("auto", "cuda", "emu"), default="auto")
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args(argv)
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    args.out.mkdir(parents=True, exist_ok=True)

    if use_cuda:
        dev = torch.device("cuda")
        cat = _check_catalogue(dev, use_profiler=True)
        over = _overhead(dev, args.steps)
    else:
        with emulated_device() as dev:
            cat = _check_catalogue(dev, use_profiler=False)
        over = []
    emu = _emu_slowdown(min(args.steps, 100))
    _write_csv(args.out / "catalogue.csv", cat)
    _write_csv(args.out / "overhead.csv", over + emu)
    meta = {
        "device": "cuda" if use_cuda else "emu",
        "gpu": torch.cuda.get_device_name() if use_cuda else None,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "nvtx_backend": BACKEND,
        "steps": args.steps,
        "command": " ".join(sys.argv),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2))

    print(f"{'pattern':<32}{'expected':>9}{'ledger':>8}{'profiler':>10}  ok")
    bad = 0
    for r in cat:
        ok = bool(r["ledger_ok"]) and bool(r.get("agree", True))
        bad += not ok
        prof = r.get("profiler", "-")
        print(
            f"{r['pattern']:<32}{r['expected']:>9}{r['ledger']:>8}{prof!s:>10}  {'yes' if ok else 'NO  ' + str(r.get('profiler_calls', ''))}"
        )
    rows = over + emu
    base = _median(rows, "plain")
    print(f"\nhost time per step (median of {args.steps}), nvtx backend {BACKEND}:")
    for config in ("plain", "regions", "ledger", "sync_debug_warn", "profiler_loop"):
        m = _median(rows, config)
        if m == m:
            print(f"  {config:<18}{m / 1e3:10.1f} us  {m / base:6.2f}x")
    pp = _median(rows, "profiler_postprocess_per_step")
    if pp == pp:
        print(f"  profiler post-processing per step {pp / 1e3:.1f} us ({pp / base:.1f}x)")
    rc = _median(rows, "region_enter_exit")
    if rc == rc:
        print(f"  region() enter+exit, no ledger: {rc:.0f} ns")
    c, e = _median(rows, "cpu_tensors"), _median(rows, "emulated_device")
    print(f"  emulated device vs CPU tensors: {e / 1e3:.1f} us vs {c / 1e3:.1f} us = {e / c:.1f}x")
    print(f"\n{len(cat) - bad}/{len(cat)} patterns agree")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
