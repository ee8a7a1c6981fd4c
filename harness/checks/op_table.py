"""`python -m harness.checks.op_table --out DIR [--record]`: which aten ops make the host wait on
CUDA, per call, as CUPTI counts the driver's synchronizing calls; against the emulated device's
table (`syncledger/src/syncledger/emulated/cuda_op_waits.json`) and its tag rule.

Every aten call of the planted-sync catalogue and of the real programs runs under a dispatch mode
that reads CUPTI's count of synchronizing driver calls before and after it (a kernel's own
dispatcher calls count towards it). An op whose waits are the same on every call is checked
against the emulated device's prediction: the table's count, else 1 when its tags say it reads
the device, else 0. Ops whose waits depend on their arguments have rules of their own (indexing,
masked_fill, histc, the copies, ...) and are reported, not checked. Exit 0 when every op agrees, 1 when one
does not (`--record` then rewrites the table), 2 without CUDA or CUPTI (nothing written).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from harness.results.files import write_atomic
from syncledger import cupti
from syncledger.emulated import door, waits

Observations = dict[str, Counter[int]]  # "aten::op.overload" -> waits per call -> calls


class _PerOp(TorchDispatchMode):
    def __init__(self, seen: Observations) -> None:
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        before = cupti.driver_calls()
        out = func(*args, **(kwargs or {}))
        waited = cupti.driver_calls() - before
        if any(_on_cuda(x) for x in tree_leaves((args, kwargs, out))):
            self.seen[func.name()][waited] += 1
        return out


def _on_cuda(x: object) -> bool:
    return isinstance(x, torch.Tensor) and x.is_cuda


def observe(bodies: Iterable[Callable[[], object]]) -> Observations:
    """Each body runs once unobserved (a library's first call initialises handles and
    workspaces, and those waits are not the op's), then once under the per-op count."""
    seen: Observations = defaultdict(Counter)
    for body in bodies:
        body()
        torch.cuda.synchronize()
        with _PerOp(seen):
            body()
        torch.cuda.synchronize()
    return dict(seen)


@dataclass(frozen=True)
class OpRow:
    op: str
    calls: int
    waits: tuple[int, ...]  # distinct waits per call seen
    predicted: int | None  # None: the op has an argument-dependent rule
    ok: bool


def _tagged(op: str) -> bool:
    overload = waits.overload_named(op)
    return overload is not None and waits.reads_by_tags(overload)


def compare(
    seen: Observations,
    table: dict[str, int],
    tagged: Callable[[str], bool] = _tagged,
    ruled: frozenset[str] = frozenset(),
) -> list[OpRow]:
    """One row per op seen: does the emulated device predict its waits per call?"""
    rows = []
    for op, per_call in sorted(seen.items()):
        distinct = tuple(sorted(per_call))
        if op in ruled and op not in table:
            rows.append(OpRow(op, sum(per_call.values()), distinct, None, True))
            continue
        predicted = table.get(op, 1 if tagged(op) else 0)
        rows.append(
            OpRow(op, sum(per_call.values()), distinct, predicted, distinct == (predicted,))
        )
    return rows


def derived_table(rows: list[OpRow], tagged: Callable[[str], bool] = _tagged) -> dict[str, int]:
    """The table the GPU says: ops with one count per call that the tag rule does not give."""
    return {
        r.op: r.waits[0]
        for r in rows
        if r.predicted is not None
        and len(r.waits) == 1
        and r.waits[0] != (1 if tagged(r.op) else 0)
    }


def _bodies() -> list[Callable[[], object]]:
    from harness.programs.suite import CUDA, runnable
    from syncledger.catalogue import CASES, make_inputs

    out: list[Callable[[], object]] = []
    for case in CASES:
        inputs = make_inputs(CUDA)
        if case.setup is not None:
            case.setup(inputs, CUDA)
        out.append(lambda case=case, inputs=inputs: case.body(inputs, CUDA))
    out += [p.prepare(CUDA) for p in runnable("cuda")]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.checks.op_table", description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record", action="store_true", help="rewrite the table from this GPU")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or not cupti.attach():
        print(
            f"op_table: needs CUDA and CUPTI (CUPTI {cupti.status()}); nothing written",
            file=sys.stderr,
        )
        return 2
    table = waits.load_op_table()
    rows = compare(observe(_bodies()), table, ruled=waits.ruled_ops() | door.transfer_ops())
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "op_table.json", json.dumps([r.__dict__ for r in rows], indent=1))
    bad = [r for r in rows if not r.ok]
    for r in bad:
        print(
            f"{r.op}: {r.calls} calls waited {r.waits} times each; emulated device predicts {r.predicted}"
        )
    print(f"op table: {len(rows) - len(bad)}/{len(rows)} ops agree with the emulated device")
    if args.record:
        doc = json.loads(waits.OP_TABLE.read_text())
        doc["waits"] = dict(sorted(derived_table(rows).items()))
        doc["measured_on"] = (
            f"{torch.cuda.get_device_name()}, torch {torch.__version__}: CUPTI per aten call"
        )
        write_atomic(waits.OP_TABLE, json.dumps(doc, indent=2) + "\n")
        print(f"recorded: {waits.OP_TABLE}")
        return 0
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
