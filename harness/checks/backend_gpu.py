"""GPU check of the backend: metadata built on CUDA == the same seeded batch on the emulated
device == the per-token oracle, for every forward mode and path; sync counts by region on
CUDA == on the emulated device.

    python -m harness check backend --out DIR [--kernels torch,triton] [--quick]

Writes DIR/gpucheck.json and DIR/gpucheck.txt, prints the table; exit 0 when everything
matches, 1 otherwise. Without a GPU it compares plain CPU against the emulated device (a
smoke run). CUDA-graph capture/replay itself is checked by the serving runner; here the
graph path is its host sequence (capture call, then replay call, then the in-graph part).
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import kernels as kernel_lib
from harness.backend.backend import DeepseekV4AttnBackend
from harness.backend.config import BackendConfig
from harness.backend.multistep import MultiStepDraftBackend
from harness.backend.oracle import full_metadata
from harness.batch.info import ForwardMode as M
from harness.batch.info import SpecInfo
from harness.checks import registry
from harness.checks.backend_cases import (
    CaseSpec,
    build_pool,
    expected_span,
    make_case_batch,
    metadata_lists,
    oracle_case,
    reserve_for,
)
from harness.results.files import result_files, write_atomic, write_json
from syncledger import SyncLedger, emulated_device_beside_gpu, region

SPEC = SpecInfo(draft_token_num=4, num_steps=3, topk=1)
CONTEXT = 2048
# (variant, mirror): the mirror-present baseline of each variant, and the absent-mirror
# paths that do not raise.
VARIANT_MIRRORS = (
    ("before", True),
    ("after", True),
    ("dropped", True),
    ("after", False),
    ("dropped", False),
)
MODES = ("decode", "verify", "prefill", "draft_extend", "draft_decode")


@dataclass(frozen=True)
class Check:
    model: str
    mode: str
    path: str  # "eager" | "graph"
    variant: str
    mirror: bool
    prep: bool
    kernels: str
    seed: int


@dataclass
class Row:
    check: Check
    tokens: int
    metadata: str  # "ok" or the differing fields
    oracle: str
    syncs_device: dict
    syncs_emu: dict
    device_ms: float

    @property
    def ok(self) -> bool:
        return (
            self.metadata == "ok"
            and self.oracle in ("ok", "-")
            and self.syncs_device == self.syncs_emu
        )


def _case(mode: str, seed: int, path: str) -> CaseSpec:
    rng = random.Random(seed)
    bs = rng.randint(2, 6)
    lens = tuple(rng.randint(8, CONTEXT) for _ in range(bs))
    if mode == "decode":
        return CaseSpec(M.DECODE, lens, spec=SPEC)
    if mode == "verify":
        return CaseSpec(M.TARGET_VERIFY, lens, spec=SPEC)
    if mode == "prefill":
        return CaseSpec(M.EXTEND, lens, tuple(rng.randint(1, min(x, 512)) for x in lens), SPEC)
    if mode == "draft_extend":
        pad = rng.randint(0, 3) if path == "eager" else 0  # the graph path pads itself
        return CaseSpec(M.DRAFT_EXTEND, lens, (4,) * bs, SPEC, pad_tokens=pad)
    return CaseSpec(M.DECODE, lens, spec=SPEC, draft_steps=SPEC.num_steps)


def _run(check: Check, dev: torch.device) -> tuple[dict, Counter, int, float, Callable]:
    """Build the world on `dev`, run the path under a ledger; return metadata lists, syncs."""
    case = _case(check.mode, check.seed, check.path)
    pool, rows = build_pool(dev, len(case.seq_lens), CONTEXT, check.seed)
    reserve_for(pool, rows, case, check.seed)
    cfg = BackendConfig(
        model=check.model,
        variant=check.variant,
        prep_in_graph=check.prep,
        spec=SPEC,
        kernels=check.kernels,
        topk_cluster_threshold=64,
    )
    batch = make_case_batch(pool, rows, case, dev, check.mirror)
    if check.mode == "draft_decode":
        be = MultiStepDraftBackend(SPEC.num_steps, cfg, pool, dev)
        target = be.attn_backends[0]
    else:
        be = DeepseekV4AttnBackend(cfg, pool, dev)
        target = be
    if check.path == "graph":
        cap = make_case_batch(pool, rows, case, dev, True)
        be.init_forward_metadata_out_graph(cap, in_capture=True)
        be.init_forward_metadata_in_graph(cap)
    t0 = time.perf_counter()
    with SyncLedger() as led, region("step"):
        if check.path == "graph":
            be.init_forward_metadata_out_graph(batch)
            be.init_forward_metadata_in_graph(batch)
        else:
            be.init_forward_metadata(batch)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    ms = (time.perf_counter() - t0) * 1e3
    syncs = Counter(f"{e.region}:{e.kind.value}:{e.op}" for e in led.events)
    md = target.forward_metadata
    lists = metadata_lists(md)

    def oracle() -> dict:
        span = expected_span(target, case, mirror=check.mirror, graph=check.path == "graph")
        return full_metadata(oracle_case(pool, rows, case, target, max_seq_len=span))

    return lists, syncs, md.num_tokens, ms, oracle


def _diff(a: dict, b: dict) -> str:
    bad = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return "ok" if not bad else ",".join(bad)


def _checks(kernels: list[str], quick: bool) -> list[Check]:
    out = []
    models = ("flash",) if quick else ("flash", "pro")
    for model, mode, path, (variant, mirror), prep, kern in itertools.product(
        models, MODES, ("eager", "graph"), VARIANT_MIRRORS, (True, False), kernels
    ):
        if path == "graph" and mode == "prefill":
            continue  # prefill runs eagerly
        if mode == "prefill" and (variant, mirror) == ("dropped", False):
            continue  # a9cf5e68 asserts the prefill mirror
        seed = zlib.crc32(f"{model}/{mode}".encode()) % 1000 if quick else len(out)
        out.append(Check(model, mode, path, variant, mirror, prep, kern, seed))
    return out


def _available_kernels(wanted: str) -> tuple[list[str], list[str]]:
    """(ops implementations that load here, those that do not and why)."""
    kernels, skipped = [], []
    for name in (k.strip() for k in wanted.split(",") if k.strip()):
        try:
            kernel_lib.get_ops(name)
            kernels.append(name)
        except (ImportError, KeyError, ModuleNotFoundError) as exc:
            skipped.append(f"{name} ({exc})")
    return kernels, skipped


def _run_checks(kernels: list[str], quick: bool, oracle: bool, dev: torch.device) -> list[Row]:
    rows: list[Row] = []
    for check in _checks(kernels, quick):
        lists_d, syncs_d, n, ms, _ = _run(check, dev)
        # The emulated side always uses the PyTorch reference ops.
        emu_check = Check(**{**asdict(check), "kernels": "torch"})
        with emulated_device_beside_gpu() as emu:
            lists_e, syncs_e, _, _, make_oracle = _run(emu_check, emu)
            oracle_res = _diff(lists_e, make_oracle()) if oracle else "-"
        if dev.type == "cpu":
            syncs_d = syncs_e  # plain CPU has no syncs to see; compare metadata only
        rows.append(
            Row(check, n, _diff(lists_d, lists_e), oracle_res, dict(syncs_d), dict(syncs_e), ms)
        )
    return rows


def _report(rows: list[Row], header: str) -> str:
    lines = [
        header,
        f"{'model':<6} {'mode':<13} {'path':<6} {'variant':<8} {'mirror':<6} {'prep':<5} "
        f"{'ops':<7} {'N':>4} {'metadata':<9} {'oracle':<7} {'syncs(dev)':>10} {'ms':>7}",
    ]
    for r in rows:
        c = r.check
        sync_col = str(sum(r.syncs_device.values())) + (
            "" if r.syncs_device == r.syncs_emu else "!=emu"
        )
        lines.append(
            f"{c.model:<6} {c.mode:<13} {c.path:<6} {c.variant:<8} {c.mirror!s:<6} {c.prep!s:<5} "
            f"{c.kernels:<7} {r.tokens:>4} {r.metadata[:9]:<9} {r.oracle[:7]:<7} {sync_col:>10} "
            f"{r.device_ms:>7.2f}"
        )
    failed = [r for r in rows if not r.ok]
    lines.append(f"{len(rows) - len(failed)}/{len(rows)} checks pass")
    lines.extend(
        f"FAIL {asdict(r.check)}: metadata={r.metadata} oracle={r.oracle} "
        f"syncs dev={r.syncs_device} emu={r.syncs_emu}"
        for r in failed
    )
    return "\n".join(lines)


def _payload(rows: list[Row], kernels: list[str], skipped: list[str], elapsed: float) -> dict:
    return {
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "kernels": kernels,
        "skipped_kernels": skipped,
        "elapsed_s": elapsed,
        "rows": [
            {
                **asdict(r.check),
                "tokens": r.tokens,
                "metadata": r.metadata,
                "oracle": r.oracle,
                "syncs_device": r.syncs_device,
                "syncs_emu": r.syncs_emu,
                "device_ms": r.device_ms,
                "ok": r.ok,
            }
            for r in rows
        ],
    }


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True, help="folder for gpucheck.json/.txt")
    ap.add_argument("--kernels", default="torch,triton", help="ops implementations to check")
    ap.add_argument("--quick", action="store_true", help="Flash only, fewer seeds")
    ap.add_argument("--no-oracle", action="store_true", help="skip the per-token oracle")


@registry.check(
    "backend",
    "the backend's metadata on CUDA against the emulated device and the oracle",
    configure=_configure,
    in_all=True,
)
def run_check(args: argparse.Namespace) -> int:
    files = result_files(args.out, ("gpucheck.txt", "gpucheck.json"))
    has_cuda = torch.cuda.is_available()
    dev = torch.device("cuda", torch.cuda.current_device()) if has_cuda else torch.device("cpu")
    kernels, skipped = _available_kernels(args.kernels)
    t_start = time.perf_counter()
    rows = _run_checks(kernels, args.quick, not args.no_oracle, dev)
    elapsed = time.perf_counter() - t_start
    name = torch.cuda.get_device_name(dev) if has_cuda else "cpu (no CUDA: smoke run)"
    text = _report(
        rows,
        f"device: {name}; torch {torch.__version__}; kernels {kernels}; "
        f"skipped {skipped or 'none'}; {elapsed:.1f} s",
    )
    print(text)
    write_atomic(files["gpucheck.txt"], text + "\n")
    write_json(files["gpucheck.json"], _payload(rows, kernels, skipped, elapsed))
    return 0 if all(r.ok for r in rows) else 1
