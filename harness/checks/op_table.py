"""`python -m harness check op-table --out DIR [--record] [--budget-s S] [--per-op N]`: which
aten ops make the host wait on CUDA, per call, as CUPTI counts the driver's synchronizing calls.

Derived over PyTorch's OpInfo database (`harness.checks.op_samples`: each op's first samples in
one dtype, its in-place variant, a backward), the planted-sync catalogue and the real programs.
Each body runs once unobserved (a library's first call initialises handles and workspaces,
whose waits are not the op's), then once under a dispatch mode that reads, around every aten
call, CUPTI's count of synchronizing driver calls and the kinds a process-wide ledger recorded.
An op's waits may depend on its arguments: calls are grouped by their call class
(`syncledger.emulated.waits.call_class`: where each tensor argument lives, and whether it is empty
or a scalar). The table holds every op whose waits differ from what the emulated device gives it
without one (its tags: an op tagged as reading the device reads it once); ops with rules of their
own (copies, indexing, ...) are checked by the replay, not tabled. The OpInfo ops are sampled
until `--budget-s` runs out; the coverage says how far.

Writes into --out: `op_table.json` (the derived entries), `ops.csv` (per op and call class:
calls and the waits seen), `bodies.csv` (per body: ran or failed, CUPTI's and the ledger's
syncs), `op_calls.pt` (a few calls of each op that waited or has a rule: arguments on the host,
the GPU's waits, for the emulated device's CPU test), `coverage.json` and `meta.json`.
`--record` merges the entries into the emulated device's table
(`syncledger/src/syncledger/emulated/cuda_op_waits.json`) with the derivation's record, naming
`--evidence` (where --out will be committed) for the CPU test. Exit 0 when it ran (a body CUDA
refuses is coverage, not a failure), 2 without CUDA or CUPTI (nothing written).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from harness.checks import op_samples
from harness.checks.registry import check
from harness.results.files import atomic_path, result_files, write_atomic, write_dict_rows
from harness.results.meta import versions, write_check_meta
from syncledger import SyncLedger, cupti
from syncledger.emulated import door, waits

Kinds = tuple[str, ...]  # the kinds of one call's waits, in order
KEEP_PER_CLASS = 3  # calls of each op and call class kept for the CPU test
KEEP_MAX_BYTES = 64 << 10
CHECKPOINT = 200  # bodies between writes of the results so far (a crash keeps them)


def _on_cuda(t: torch.Tensor) -> bool:
    return t.is_cuda


def _host_copy(tree: Any) -> Any:
    """The arguments with each tensor as ("tensor", host values, on the device, pinned): one
    entry per tensor, so an argument passed twice stays one (`equal(t, t)` looks at neither)."""
    memo: dict[int, tuple[str, torch.Tensor, bool, bool]] = {}

    def copy(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if id(x) not in memo:
                pinned = not x.is_cuda and x.is_pinned()
                memo[id(x)] = ("tensor", x.detach().cpu(), x.is_cuda, pinned)
            return memo[id(x)]
        return ("device", x.type) if isinstance(x, torch.device) else x

    return tree_map(copy, tree)


@dataclass
class Observations:
    calls: dict[tuple[str, str], Counter[Kinds]] = field(
        default_factory=lambda: defaultdict(Counter)
    )
    kept: list[dict[str, Any]] = field(default_factory=list)  # calls for the CPU test
    mismatched: Counter[str] = field(default_factory=Counter)  # op -> calls the ledger miscounted
    _clean: Counter[tuple[str, str]] = field(default_factory=Counter)  # calls seen without a wait
    _kept: Counter[tuple[str, str]] = field(default_factory=Counter)

    def wants_snapshot(self, key: tuple[str, str]) -> bool:
        return self._kept[key] < KEEP_PER_CLASS and self._clean[key] < KEEP_PER_CLASS

    def add(self, key: tuple[str, str], kinds: Kinds, snapshot: Any, keep: bool) -> None:
        self.calls[key][kinds] += 1
        if not kinds:
            self._clean[key] += 1
        if snapshot is not None and (keep or kinds) and self._kept[key] < KEEP_PER_CLASS:
            self._kept[key] += 1
            self.kept.append({"op": key[0], "class": key[1], "args": snapshot, "waits": kinds})


def _interesting(func: Any, ruled: frozenset[str]) -> bool:
    """Ops whose waits the emulated device decides by a rule or its tags: kept even unwaiting."""
    return func.name() in ruled or waits.reads_by_tags(func)


def _device_copy(tree: Any) -> Any:
    """The arguments with each tensor cloned where it is (no wait), or None when they are too
    large to keep (a program's feature maps tell the CPU test nothing its small calls do not)."""
    tensors = {id(t): t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)}
    if sum(t.numel() * t.element_size() for t in tensors.values()) > KEEP_MAX_BYTES:
        return None
    memo: dict[int, torch.Tensor] = {}

    def clone(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        if id(x) not in memo:
            memo[id(x)] = x.clone().pin_memory() if not x.is_cuda and x.is_pinned() else x.clone()
        return memo[id(x)]

    try:
        return tree_map(clone, tree)
    except RuntimeError:  # a layout clone refuses: this call is not kept
        return None


class _PerOp(TorchDispatchMode):
    def __init__(self, seen: Observations, ledger: SyncLedger, ruled: frozenset[str]) -> None:
        super().__init__()
        self.seen, self.ledger, self.ruled = seen, ledger, ruled
        self.pending: list[tuple[tuple[str, str], Kinds, Any, bool]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        key = (func.name(), waits.call_class(args, kwargs, _on_cuda))
        # device copies of the inputs before an in-place op changes them (no wait: a kernel)
        snapshot = _device_copy((args, kwargs)) if self.seen.wants_snapshot(key) else None
        before, logged = cupti.driver_calls(), len(self.ledger.events)
        out = func(*args, **kwargs)
        waited = cupti.driver_calls() - before
        if not any(
            _on_cuda(x) for x in tree_leaves((args, kwargs, out)) if isinstance(x, torch.Tensor)
        ):
            return out
        kinds = tuple(e.kind.value for e in self.ledger.events[logged:] if e.is_sync)
        if len(kinds) != waited:  # the driver is the judge of how many
            self.seen.mismatched[key[0]] += 1
            kinds = (*kinds, *("d2h_read",) * waited)[:waited]
        self.pending.append((key, kinds, snapshot, _interesting(func, self.ruled)))
        return out

    def settle(self) -> None:
        """Take the observed calls in, their inputs to the host (after the count: copies wait)."""
        for key, kinds, snapshot, keep in self.pending:
            copied = None if snapshot is None else _host_copy(snapshot)
            self.seen.add(key, kinds, copied, keep)
        self.pending.clear()


def _ruled() -> frozenset[str]:
    return waits.measured_ops() | door.transfer_ops()


def observe(
    bodies: Iterable[op_samples.Body],
    seen: Observations,
    rows: list[dict[str, Any]],
    checkpoint: Callable[[], None],
) -> None:
    """Run each body twice, the second time observed per aten call and as a whole; every
    CHECKPOINT bodies, `checkpoint` writes what was seen so far."""
    ruled = _ruled()
    for n, body in enumerate(bodies, 1):
        if n % CHECKPOINT == 0:
            checkpoint()
        row: dict[str, Any] = {"source": body.source, "body": body.name}
        try:
            body.run()
            torch.cuda.synchronize()
            before = cupti.driver_calls()
            with SyncLedger(scope="process") as led:
                mode = _PerOp(seen, led, ruled)
                with mode:
                    body.run()
                row["driver_calls"] = cupti.driver_calls() - before
            row["ledger_syncs"] = led.count()
            torch.cuda.synchronize()
            mode.settle()
            row["status"] = "ok"
        except Exception as exc:  # a sample CUDA refuses is coverage, not a failure
            row["status"] = f"failed: {type(exc).__name__}: {str(exc)[:160]}"
        rows.append(row)


def _encode(kinds: Kinds) -> int | list[str]:
    return len(kinds) if all(k == "d2h_read" for k in kinds) else list(kinds)


def _most_common(counts: Counter[Kinds]) -> Kinds:
    return max(counts.items(), key=lambda kv: (kv[1], len(kv[0])))[0]


def derive(
    calls: dict[tuple[str, str], Counter[Kinds]],
    tagged: Callable[[str], bool],
    ruled: frozenset[str],
) -> tuple[dict[str, Any], list[str]]:
    """(table entries, ops whose waits varied within one call class) from the observations."""
    per_op: dict[str, dict[str, Counter[Kinds]]] = defaultdict(dict)
    for (op, cls), counts in calls.items():
        per_op[op][cls] = counts
    entries: dict[str, Any] = {}
    varied = []
    for op, classes in sorted(per_op.items()):
        if op in ruled:
            continue
        if any(len(c) > 1 for c in classes.values()):
            varied.append(op)
        overall: Counter[Kinds] = sum(classes.values(), Counter())
        usual = _most_common(overall)
        by_class = {cls: _most_common(c) for cls, c in classes.items()}
        others = {cls: _encode(k) for cls, k in sorted(by_class.items()) if k != usual}
        untabled: Kinds = ("d2h_read",) if tagged(op) else ()
        if others:
            entries[op] = {"by_args": others, "else": _encode(usual)}
        elif usual != untabled:
            entries[op] = _encode(usual)
    return entries, varied


def _tagged(op: str) -> bool:
    overload = waits.overload_named(op)
    return overload is not None and waits.reads_by_tags(overload)


def _bodies(budget_s: float, per_op: int, counts: dict[str, int]) -> Iterator[op_samples.Body]:
    """The catalogue and the programs, then the OpInfo ops until the budget is spent."""
    yield from op_samples.catalogue_bodies()
    yield from op_samples.program_bodies("cuda")
    try:
        ops = op_samples.opinfo_ops()
    except ImportError as exc:  # PyTorch's test modules need expecttest
        print(f"op_table: no OpInfo database here ({exc})", file=sys.stderr)
        return
    counts["opinfo_ops"] = len(ops)
    deadline = time.monotonic() + budget_s
    for name, op, dtype in ops:
        if time.monotonic() > deadline:
            break
        bodies = op_samples.opinfo_bodies(name, op, dtype, per_op)
        counts["opinfo_sampled"] += 1
        counts["opinfo_without_samples"] += not bodies
        yield from bodies


def coverage(
    counts: dict[str, int],
    rows: list[dict[str, Any]],
    seen: Observations,
    entries: dict[str, Any],
    varied: list[str],
) -> dict[str, Any]:
    ops = {op for op, _ in seen.calls}
    waited = {op for (op, _), c in seen.calls.items() if any(k for k in c)}
    return {
        "opinfo_ops": counts["opinfo_ops"],
        "opinfo_ops_sampled": counts["opinfo_sampled"],
        "opinfo_ops_without_cuda_samples": counts["opinfo_without_samples"],
        "bodies": len(rows),
        "bodies_failed_on_cuda": sum(1 for r in rows if r["status"] != "ok"),
        "aten_overloads_seen": len(ops),
        "aten_overloads_that_wait": len(waited),
        "table_entries": len(entries),
        "ops_whose_waits_vary_within_a_call_class": varied,
        "ops_where_the_ledger_miscounted": dict(seen.mismatched),
    }


def _print_coverage(cov: dict[str, Any]) -> None:
    print(
        f"op table: {cov['opinfo_ops_sampled']} of {cov['opinfo_ops']} OpInfo ops sampled "
        f"({cov['opinfo_ops_without_cuda_samples']} without samples here), {cov['bodies']} bodies "
        f"({cov['bodies_failed_on_cuda']} failed on CUDA), {cov['aten_overloads_seen']} aten "
        f"overloads seen, {cov['aten_overloads_that_wait']} wait, {cov['table_entries']} table "
        f"entries, in {cov['seconds']} s"
    )
    if cov["ops_whose_waits_vary_within_a_call_class"]:
        print(
            f"  waits vary within a call class: {cov['ops_whose_waits_vary_within_a_call_class']}"
        )
    if cov["ops_where_the_ledger_miscounted"]:
        print(
            f"  the ledger's count differed from CUPTI's: {cov['ops_where_the_ledger_miscounted']}"
        )


def _op_rows(seen: Observations) -> list[dict[str, Any]]:
    return [
        {"op": op, "call_class": cls, "calls": sum(c.values()),
         "waits": " | ".join(f"{'+'.join(k) or '-'} x{n}" for k, n in c.most_common())}
        for (op, cls), c in sorted(seen.calls.items())
    ]  # fmt: skip


def record(entries: dict[str, Any], derived: dict[str, Any], seen_ops: set[str]) -> None:
    """Merge into the emulated device's table: the ops seen now take this run's word; the
    others keep theirs."""
    doc = json.loads(waits.OP_TABLE.read_text())
    kept = {op: w for op, w in doc["waits"].items() if op not in seen_ops}
    doc["waits"] = dict(sorted({**kept, **entries}.items()))
    doc["derived"] = derived
    doc.pop("measured_on", None)
    write_atomic(waits.OP_TABLE, json.dumps(doc, indent=1) + "\n")


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record", action="store_true", help="merge into the emulated device's table")
    ap.add_argument("--budget-s", type=float, default=240.0, help="time for the OpInfo ops")
    ap.add_argument("--per-op", type=int, default=3, help="samples per OpInfo op")
    ap.add_argument(
        "--evidence",
        default="",
        help="where --out is committed, for the record; {gpu} becomes the GPU's model (h100)",
    )
    ap.add_argument("--measured-commit", default="", help="the commit measured (for the record)")


@check(
    "op-table",
    "the CUDA waits of every sampled ATen op (OpInfo, the catalogue, the programs) with CUPTI; --record rewrites the emulated device's table",
    configure=_configure,
    in_all=True,
    needs_cuda=True,
)
def run_check(args: argparse.Namespace) -> int:
    if not cupti.attach():
        print(
            f"op_table: needs CUPTI ({cupti.status()}); nothing written",
            file=sys.stderr,
        )
        return 2
    faulthandler.enable()  # a crash in a kernel names the body's frames
    names = ("op_table.json", "coverage.json", "ops.csv", "bodies.csv", "op_calls.pt", "meta.json")
    files = result_files(args.out, names)
    t0 = time.monotonic()
    counts: dict[str, int] = Counter()
    seen, rows = Observations(), []

    def write() -> tuple[dict[str, Any], dict[str, Any]]:
        entries, varied = derive(seen.calls, _tagged, _ruled())
        cov = coverage(counts, rows, seen, entries, varied)
        cov["seconds"] = round(time.monotonic() - t0)
        write_atomic(files["op_table.json"], json.dumps(entries, indent=1, sort_keys=True) + "\n")
        write_atomic(files["coverage.json"], json.dumps(cov, indent=1) + "\n")
        write_dict_rows(files["ops.csv"], _op_rows(seen))
        write_dict_rows(files["bodies.csv"], rows)
        with atomic_path(files["op_calls.pt"]) as tmp:
            torch.save(seen.kept, tmp)
        return entries, cov

    observe(_bodies(args.budget_s, args.per_op, counts), seen, rows, write)
    entries, cov = write()
    extra = {"measured_commit": args.measured_commit} if args.measured_commit else {}
    write_check_meta(args.out, "op_table", "cuda", cupti=cupti.status(), **extra)
    _print_coverage(cov)
    if args.record:
        model = re.search(r"\b([a-z]\d{2,3})\b", torch.cuda.get_device_name().lower())
        derived = {
            "command": " ".join(["python -m harness check op-table", *sys.argv[1:]]),
            "gpu": torch.cuda.get_device_name(),
            "torch": versions()["torch_version"],
            "measured_commit": args.measured_commit,
            "evidence": args.evidence.replace("{gpu}", model[1] if model else "gpu"),
            "coverage": {k: v for k, v in cov.items() if isinstance(v, int)},
        }
        record(entries, derived, {op for op, _ in seen.calls})
        print(f"recorded: {waits.OP_TABLE}")
    return 0
