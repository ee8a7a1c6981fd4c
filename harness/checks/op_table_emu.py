"""`python -m harness check op-table-emu --out DIR [--gpu DIR] [--per-op N]`: the op table's
bodies (`harness.checks.op_samples`: OpInfo samples, the catalogue, the real programs) on the
emulated device, any machine, against what a GPU counted for the same bodies.

Each body runs twice, as `python -m harness check op-table` runs it on the GPU: a warm-up, then
once under a process-wide ledger. With `--gpu` (the folder that check wrote: its `bodies.csv`)
only the bodies the GPU ran are run, and each one's syncs are compared with the ledger's on
CUDA. Without it this is the dry run that says what the derivation will sample and how long the
emulated device takes. Writes `bodies.csv` and prints the coverage: bodies, those the emulated
device could not run, and, against the GPU, those whose syncs agree and differ; then replays
the aten calls the GPU kept (`op_calls.pt`, `replay`), the test suite's check, and lists those
whose waits differ. Exit 1 when a
body the GPU ran differs here or fails here, else 0; 2 when --gpu has no bodies.csv.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_map

from harness.checks import op_samples
from harness.checks.registry import check
from harness.results.files import OutputPlan, write_dict_rows
from syncledger import SyncLedger, emulated_device
from syncledger.emulated import EmuTensor, waits
from syncledger.emulated.pinned import pin


def _gpu_rows(folder: Path) -> dict[str, dict[str, str]]:
    with (folder / "bodies.csv").open(newline="") as f:
        return {row["body"]: row for row in csv.DictReader(f)}


def _bodies(per_op: int, wanted: dict[str, Any] | None) -> Iterator[op_samples.Body]:
    yield from op_samples.catalogue_bodies()
    yield from op_samples.program_bodies("emu")
    ops = None if wanted is None else {b.split("/")[0] for b in wanted if b.startswith("opinfo:")}
    for name, op, dtype in op_samples.opinfo_ops(only=ops):
        yield from op_samples.opinfo_bodies(name, op, dtype, per_op)


def run(body: op_samples.Body) -> dict[str, Any]:
    row: dict[str, Any] = {"source": body.source, "body": body.name}
    try:
        body.run()
        with SyncLedger(scope="process") as led:
            body.run()
        row["ledger_syncs"] = led.count()
        row["status"] = "ok"
    except Exception as exc:
        row["status"] = f"failed: {type(exc).__name__}: {str(exc)[:160]}"
    return row


def _arguments(saved: Any) -> Any:
    """The arguments a GPU kept, on the emulated device: each saved tensor made once."""
    memo: dict[int, Any] = {}

    def make(x: Any) -> Any:
        if not _is_saved(x):
            return x
        if x[0] == "device":
            return torch.device(x[1])
        if id(x) not in memo:
            _, values, on_device, pinned = x
            memo[id(x)] = EmuTensor(values.clone()) if on_device else values.clone()
            if pinned:
                pin(memo[id(x)])
        return memo[id(x)]

    return tree_map(make, saved, is_leaf=_is_saved)


def replay(calls: list[dict[str, Any]]) -> list[str]:
    """The aten calls a GPU recorded (`op_calls.pt` of `harness.checks.op_table`), each made again
    on the emulated device: one line per call whose waits differ from the GPU's. Calls of ops
    not loaded here are left out."""
    differ = []
    with emulated_device():
        for call in calls:
            func = waits.overload_named(call["op"])
            if func is None:
                continue
            args, kwargs = _arguments(call["args"])
            # the waits come first; a CPU kernel may refuse the rest
            with SyncLedger() as led, contextlib.suppress(Exception):
                func(*args, **kwargs)
            got = tuple(e.kind.value for e in led.events if e.is_sync)
            if got != tuple(call["waits"]):
                differ.append(
                    f"{call['op']} [{call['class']}]: GPU {call['waits']}, emulated {got}"
                )
    return differ


def _is_saved(x: Any) -> bool:
    return isinstance(x, tuple) and len(x) in (2, 4) and x[0] in ("tensor", "device")


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpu", type=Path, help="the folder `harness.checks.op_table` wrote")
    ap.add_argument("--per-op", type=int, default=3, help="samples per OpInfo op")


@check(
    "op-table-emu",
    "the op table's samples on the emulated device, against what a GPU run of op-table recorded (--gpu)",
    configure=_configure,
    in_all=True,
    with_all=lambda out: ["--gpu", str(out.parent / "op-table")],
)
def run_check(args: argparse.Namespace) -> int:
    gpu = None
    if args.gpu is not None:
        if not (args.gpu / "bodies.csv").is_file():
            print(f"op_table_emu: {args.gpu / 'bodies.csv'}: no such file", file=sys.stderr)
            return 2
        gpu = {b: r for b, r in _gpu_rows(args.gpu).items() if r["status"] == "ok"}
    plan = OutputPlan()  # --out may be --gpu's folder: its bodies.csv is not replaced then
    if args.gpu is not None:
        for name in ("bodies.csv", "op_calls.pt"):
            plan.read(args.gpu / name, "--gpu")
    bodies_csv = plan.write(args.out / "bodies.csv", "--out")
    t0 = time.monotonic()
    rows = []
    with emulated_device():
        for body in _bodies(args.per_op, gpu):
            if gpu is not None and body.name not in gpu:
                continue
            row = run(body)
            if gpu is not None:
                row["gpu_syncs"] = int(gpu[body.name]["ledger_syncs"])
                row["agree"] = row.get("ledger_syncs") == row["gpu_syncs"]
            rows.append(row)
    seconds = time.monotonic() - t0
    write_dict_rows(bodies_csv, rows)
    failed = [r for r in rows if r["status"] != "ok"]
    ops = {r["body"].split("/")[0] for r in rows if r["source"] == "opinfo"}
    print(
        f"emulated device: {len(rows)} bodies ({len(ops)} OpInfo ops), {len(failed)} could not "
        f"run here, in {seconds:.0f} s"
    )
    if gpu is None:
        return 0
    differ = [r for r in rows if r["status"] == "ok" and not r["agree"]]
    print(f"against the GPU: {len(rows) - len(failed) - len(differ)} agree, {len(differ)} differ")
    for r in differ[:40]:
        print(f"  {r['body']}: emulated {r['ledger_syncs']}, GPU {r['gpu_syncs']}")
    for r in failed[:40]:
        print(f"  {r['body']}: {r['status']}")
    calls = torch.load(args.gpu / "op_calls.pt", weights_only=False)
    replayed = replay(calls)
    print(f"aten calls the GPU kept: {len(calls)}, {len(replayed)} wait otherwise here")
    for line in replayed[:40]:
        print(f"  {line}")
    return 1 if differ or failed or replayed else 0
