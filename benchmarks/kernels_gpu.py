#!/usr/bin/env python3
"""GPU benchmark and checks of kernels/ (Triton) against the PyTorch composite.

    python benchmarks/kernels_gpu.py --out results/kernels/h200     # on the H200 (< 4 min)
    python benchmarks/kernels_gpu.py --smoke --out /tmp/k           # CPU, Triton interpreter

For every case (model flash|pro x forward mode decode|verify(D=4) x batch 1,8,64,256,512, a
context of --context tokens with random lengths) and every op (each kernel + the whole
upgrade), for impl torch and triton:
  (a) check: triton output == torch output, bit for bit;
  (b) check: the call makes no host-device sync (torch.cuda.set_sync_debug_mode("error"), and
      syncledger's SyncLedger when importable) and is capturable in a CUDA graph whose
      replay reproduces the eager output;
  (c) time: eager (CUDA events, GPU idle and L2 flushed before each sample, so host launch
      cost counts) and CUDA-graph replay (L2 flushed), every sample kept; achieved bandwidth
      from the bytes formula in bench_common.py;
  (d) write kernels_samples.csv (one row per sample), kernels_summary.csv (medians, speedups,
      bandwidth), kernels_checks.csv and kernels_meta.json into --out; print a summary last.
Batch 256 runs first; after --budget-s seconds (default 200) the remaining cases are skipped
and listed, so the run stays under 4 minutes. Exit status 1 when a check failed.
Ragged verify (per-request token counts) is checked for equality, not timed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from harness.results.files import write_atomic, write_json

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_COLS = [
    "op",
    "impl",
    "mode",
    "batch_size",
    "forward_mode",
    "model",
    "num_tokens",
    "context_len",
    "sample",
    "metric",
    "value",
    "unit",
]
SUMMARY_COLS = [
    "op",
    "impl",
    "mode",
    "batch_size",
    "forward_mode",
    "model",
    "num_tokens",
    "samples",
    "median_us",
    "p10_us",
    "p90_us",
    "speedup_vs_torch",
    "bytes",
    "achieved_GBps",
    "bound_us",
    "ratio_to_bound",
    "floor_bound_us",
    "ratio_to_floor_bound",
]
CHECK_COLS = ["op", "impl", "model", "forward_mode", "batch_size", "check", "passed", "detail"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="folder for the result files")
    p.add_argument("--smoke", action="store_true", help="tiny CPU run with TRITON_INTERPRET=1")
    p.add_argument("--samples", type=int, default=25, help="timed samples per case and mode")
    p.add_argument("--context", type=int, default=32768, help="context length (tokens)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    p.add_argument("--ops", nargs="+", default=None, help="subset of ops (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--budget-s", type=float, default=200.0, help="skip remaining cases after this long"
    )
    return p.parse_args(argv)


def _write_csv(path: Path, cols: list[str], rows: list[dict]) -> None:
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, text.getvalue())  # never a half-written file under the final name


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def machine_meta(torch, device, args) -> dict:
    import triton

    meta = {
        "format_version": 1,
        "command": " ".join([sys.executable, *sys.argv]),
        "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "device": device.type,
        "host": platform.node(),
        "smoke": args.smoke,
        "samples": args.samples,
        "context_len": args.context,
        "seed": args.seed,
    }
    if device.type == "cuda":
        from harness.results.meta import nvidia_driver  # the benchmark may use the harness

        props = torch.cuda.get_device_properties(device)
        meta.update(
            gpu_name=props.name,
            driver=nvidia_driver(),
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            gpu_mem_bytes=props.total_memory,
        )
    return meta


class Bench:
    def __init__(self, args: argparse.Namespace, torch, bc, device) -> None:
        self.args, self.torch, self.bc, self.device = args, torch, bc, device
        self.cuda = device.type == "cuda"
        self.samples: list[dict] = []
        self.checks: list[dict] = []
        self.bytes: dict[tuple, int] = {}
        self.flush = bc.L2Flusher(device) if self.cuda else None

    def _row(self, key: dict, mode: str, i: int, metric: str, value: float, unit: str) -> None:
        self.samples.append(
            {
                **key,
                "mode": mode,
                "sample": i,
                "metric": metric,
                "value": round(value, 4),
                "unit": unit,
            }
        )

    def _check(self, key: dict, check: str, passed: bool | None, detail: str = "") -> None:
        names = ("op", "impl", "model", "forward_mode", "batch_size")
        row = {k: key[k] for k in names}
        self.checks.append({**row, "check": check, "passed": passed, "detail": detail[:300]})

    def check_ragged(self, context_len: int) -> None:
        """Ragged verify / draft-extend (per-request token counts, padding tokens): checked
        for equality only; the timed cases are the uniform decode / verify shapes."""
        bc = self.bc
        for bs in (1, 64):
            spec = bc.CaseSpec(bs, context_len, 4, 1024, ragged=True, seed=self.args.seed + bs)
            inp = bc.random_inputs(spec, device=self.device)
            ok = bc.same(
                bc.kernels.get_ops("triton").upgrade(inp), bc.kernels.get_ops("torch").upgrade(inp)
            )
            key = {"op": "upgrade_ragged", "impl": "triton", "model": "pro", "batch_size": bs}
            self._check({**key, "forward_mode": "verify"}, "equals_reference", ok)

    def run_noop(self) -> None:
        """Floor: one tiny kernel, eager and graph-replayed."""
        if not self.cuda:
            return
        x = self.torch.zeros(1, device=self.device)
        key = {
            "op": "noop",
            "impl": "torch",
            "batch_size": 0,
            "forward_mode": "-",
            "model": "-",
            "num_tokens": 0,
            "context_len": 0,
        }
        for i, (dev_us, _host_us) in enumerate(self.bc.time_eager_cuda(x.zero_, self.flush, 50)):
            self._row(key, "eager", i, "device_us", dev_us, "us")
        graph, _ = self.bc.capture(x.zero_)
        for i, us in enumerate(self.bc.time_graph_cuda(graph, self.flush, 50)):
            self._row(key, "graph", i, "device_us", us, "us")

    def run_case(self, case, ops_names: list[str]) -> None:
        bc, torch = self.bc, self.torch
        prep = bc.prepare(case, self.device)
        impls = {name: bc.kernels.get_ops(name) for name in ("torch", "triton")}
        for op in ops_names:
            fn = bc.OPS[op]
            expect = fn(impls["torch"], prep)
            self.bytes[(op, case)] = bc.bytes_moved(op, prep, expect)
            for impl, ops in impls.items():
                key = {
                    "op": op,
                    "impl": impl,
                    "batch_size": case.batch_size,
                    "forward_mode": case.forward_mode,
                    "model": case.model,
                    "num_tokens": prep.n,
                    "context_len": case.context_len,
                }

                def call(ops=ops, fn=fn):
                    return fn(ops, prep)

                got = call()  # also compiles Triton kernels before anything is timed
                if impl == "triton":
                    self._check(key, "equals_reference", bc.same(got, expect))
                if not self.cuda:
                    for i, us in enumerate(bc.time_host(call, self.args.samples)):
                        self._row(key, "eager", i, "host_us", us, "us")
                    continue
                self._sync_check(key, call)
                for i, (dev_us, host_us) in enumerate(
                    bc.time_eager_cuda(call, self.flush, self.args.samples)
                ):
                    self._row(key, "eager", i, "device_us", dev_us, "us")
                    self._row(key, "eager", i, "host_us", host_us, "us")
                try:
                    graph, static_out = bc.capture(call)
                    graph.replay()
                    torch.cuda.synchronize()
                    ok = bc.same(static_out, got)
                    self._check(key, "graph_capture_replay", ok)
                except Exception as e:  # a failed capture is a finding, not a crash
                    self._check(key, "graph_capture_replay", False, repr(e))
                    continue
                for i, us in enumerate(bc.time_graph_cuda(graph, self.flush, self.args.samples)):
                    self._row(key, "graph", i, "device_us", us, "us")
                del graph, static_out

    def _sync_check(self, key: dict, call) -> None:
        torch = self.torch
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            call()
            self._check(key, "no_sync", True)
        except RuntimeError as e:
            self._check(key, "no_sync", False, repr(e))
        finally:
            torch.cuda.set_sync_debug_mode(0)
        self._ledger_check(key, call)

    def _ledger_check(self, key: dict, call) -> None:
        """The same under the harness's sync ledger, when the harness is importable."""
        try:
            from syncledger import SyncLedger
        except ImportError:
            return
        try:
            with SyncLedger() as led:
                call()
            events = [f"{e.kind}:{e.op}@{e.location}" for e in led.events]
            self._check(key, "no_sync_ledger", not events, "; ".join(events))
        except Exception as e:  # the ledger is another team's code: report, do not crash
            self._check(key, "no_sync_ledger", None, f"ledger error: {e!r}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import
    sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]
    import bench_common as bc
    import torch
    from bench_report import print_summary, summarize

    cuda = torch.cuda.is_available() and not args.smoke
    device = torch.device("cuda" if cuda else "cpu")
    if args.smoke:
        cases = [
            bc.Case(m, f, b, 300, args.seed)
            for m in ("flash", "pro")
            for f in bc.FORWARD_MODES
            for b in (args.batch_sizes or [1, 3])
        ]
        args.samples = min(args.samples, 3)
    else:
        # batch 256 first: the targets are stated there, and the time budget may cut the tail
        sizes = sorted(args.batch_sizes or bc.BATCH_SIZES, key=lambda b: (b != 256, b))
        cases = [
            bc.Case(m, f, b, args.context, args.seed)
            for b in sizes
            for m in bc.MODELS
            for f in bc.FORWARD_MODES
        ]
    ops_names = args.ops or list(bc.OPS)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = machine_meta(torch, device, args)
    bw = bc.copy_bandwidth(device) if cuda else bc.H200_COPY_BW
    meta.update(
        copy_bandwidth_Bps=bw,
        nominal_bandwidth_Bps=bc.H200_NOMINAL_BW,
        bytes_formula=bc.__doc__.split("Bytes formula")[1].strip(),
    )
    bench = Bench(args, torch, bc, device)
    t0 = time.perf_counter()
    bench.run_noop()
    bench.check_ragged(300 if args.smoke else args.context)
    skipped = []
    for case in cases:
        if time.perf_counter() - t0 > args.budget_s:
            skipped.append(f"{case.model}/{case.forward_mode}/bs{case.batch_size}")
            continue
        bench.run_case(case, ops_names)
        print(
            f"  done {case.model} {case.forward_mode} bs={case.batch_size} "
            f"({time.perf_counter() - t0:.0f}s)",
            flush=True,
        )
    summary = summarize(bench, bw)
    _write_csv(args.out / "kernels_samples.csv", SAMPLE_COLS, bench.samples)
    _write_csv(args.out / "kernels_checks.csv", CHECK_COLS, bench.checks)
    _write_csv(args.out / "kernels_summary.csv", SUMMARY_COLS, summary)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):  # printed last, after the files are written
        verdicts = print_summary(summary, bench.checks, cuda)
        if skipped:
            print(f"time budget {args.budget_s}s reached; skipped cases: {', '.join(skipped)}")
    meta.update(
        skipped_cases=skipped,
        elapsed_s=round(time.perf_counter() - t0, 1),
        targets=verdicts,
        checks_failed=sum(c["passed"] is False for c in bench.checks),
    )
    write_json(args.out / "kernels_meta.json", meta)
    print(f"wrote {args.out}/kernels_{{samples,summary,checks}}.csv and kernels_meta.json")
    print(text.getvalue(), end="")
    return 1 if meta["checks_failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
