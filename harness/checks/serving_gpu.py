"""GPU check: real CUDA-graph capture and replay for every bucket the default scenarios use, and
the metadata after replay compared with the emulated device's result for the same seeded batch.

    python -m harness check serving --out DIR [--model flash] [--quick]

Per bucket b (and per pass: DECODE, TARGET_VERIFY, draft DECODE) a world is built on CUDA with
only b captured and a batch of b - 1 requests (so padding is exercised), one step runs, and the
full metadata the graph wrote is compared field by field with the same world on the emulated
device. A second phase captures upstream's full bucket list once per serving mode and runs a few
steps. Writes ``gpucheck.json`` and ``gpucheck.txt`` to DIR; exit 0 when everything matches.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from harness.checks.registry import check
from harness.results.files import result_files, write_atomic, write_json
from harness.serving.buckets import capture_buckets
from harness.serving.section import ServingConfig
from harness.serving.world import WorldConfig, build_world

# Batch sizes of scenarios/{nonspec,eagle,specv2_mirror}.yaml, used when YAML is unavailable.
DEFAULT_BATCH_SIZES = {"nonspec": [8, 64, 300], "spec": [4, 32, 300]}
SCENARIO_FILES = {"nonspec": ["nonspec.yaml"], "spec": ["eagle.yaml", "specv2_mirror.yaml"]}


def scenario_batch_sizes(root: Path) -> dict[str, list[int]]:
    out = {k: list(v) for k, v in DEFAULT_BATCH_SIZES.items()}
    try:
        import yaml
    except ImportError:
        return out
    for kind, names in SCENARIO_FILES.items():
        sizes: set[int] = set()
        for name in names:
            path = root / "scenarios" / name
            if path.exists():
                data = yaml.safe_load(path.read_text()) or {}
                sizes.update(int(b) for b in data.get("batch_sizes", []))
        if sizes:
            out[kind] = sorted(sizes)
    return out


def buckets_used(spec: bool, batch_sizes: list[int], max_bs: int = 256) -> list[int]:
    return sorted({b for bs in batch_sizes for b in capture_buckets(spec, max_bs, bs, "near")})


def _metadata(world, mode: str, bucket: int) -> dict[str, torch.Tensor]:
    """Full metadata the replayed graph(s) of this bucket produced, as CPU tensors."""
    from harness.backend import GraphBucket
    from harness.backend.metadata import COMPRESS_FIELDS, CORE_FIELDS
    from syncledger import host_values

    sources = []
    if mode == "nonspec":
        sources.append(("DECODE", world.target_backend, GraphBucket.DECODE_OR_IDLE))
    else:
        sources.append(("TARGET_VERIFY", world.target_backend, GraphBucket.TARGET_VERIFY))
        inner = world.draft_backend.attn_backends[: world.draft_backend.num_steps - 1]
        for i, b in enumerate(inner):
            sources.append((f"DRAFT_DECODE[{i}]", b, GraphBucket.DECODE_OR_IDLE))
    out = {}
    for label, backend, gb in sources:
        md = backend.graph_metadata_for(gb, bucket)
        assert md is not None, f"no graph metadata for {label} bucket {bucket}"
        for name in (*CORE_FIELDS, *COMPRESS_FIELDS):
            t = getattr(md, name, None)
            if isinstance(t, torch.Tensor):
                out[f"{label}.{name}"] = host_values(t).detach().to("cpu").clone()
    return out


def _run_one(cfg: WorldConfig, device: torch.device) -> tuple[object, dict, float]:
    t0 = time.perf_counter()
    world = build_world(cfg, device)
    world.warmup_and_capture()
    capture_s = time.perf_counter() - t0
    info = world.step()
    _drain(device)
    return info, world, capture_s


def _drain(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_bucket(
    mode: str, bucket: int, model: str, seed: int, device: torch.device | None = None
) -> dict:
    """``device``: CUDA by default (a CPU run checks this script's own logic in tests)."""
    raw_bs = max(1, bucket - 1)
    serving = ServingConfig(model=model, serving_mode=mode, prefill_every=0, forward_us=20.0)
    cfg = WorldConfig(serving, "after", "auto", raw_bs, seed, capture=(bucket,))
    row = {"mode": mode, "bucket": bucket, "raw_bs": raw_bs}
    info, world, capture_s = _run_one(cfg, device or torch.device("cuda"))
    row["capture_s"] = round(capture_s, 3)
    graph = [p for p in info.passes if p.path == "graph"]
    row["graph_passes"] = [f"{p.forward_mode}@{p.bucket}" for p in graph]
    row["replayed"] = bool(graph) and all(p.bucket == bucket for p in graph)
    got = _metadata(world, mode, bucket)
    ref, row["reference"] = _reference(cfg, mode, bucket)
    bad = [k for k in sorted(ref) if k not in got or not torch.equal(got[k], ref[k])]
    row["fields"] = len(ref)
    row["mismatched"] = bad
    row["ok"] = row["replayed"] and not bad and len(got) == len(ref)
    return row


def _reference(cfg: WorldConfig, mode: str, bucket: int) -> tuple[dict, str]:
    from syncledger import emulated_device_beside_gpu

    try:
        with emulated_device_beside_gpu() as dev:
            _, world, _ = _run_one(cfg, dev)
            return _metadata(world, mode, bucket), "emulated"
    except Exception as exc:  # emulation next to a real GPU is a fallback path: say so
        print(f"  emulated reference failed ({exc!r}); using plain CPU", file=sys.stderr)
        _, world, _ = _run_one(cfg, torch.device("cpu"))
        return _metadata(world, mode, bucket), "cpu"


def check_full_capture(mode: str, batch_size: int, model: str, seed: int, steps: int) -> dict:
    serving = ServingConfig(model=model, serving_mode=mode, prefill_every=4, forward_us=500.0)
    cfg = WorldConfig(serving, "after", "auto", batch_size, seed, capture="all")
    t0 = time.perf_counter()
    world = build_world(cfg, torch.device("cuda"))
    world.warmup_and_capture()
    capture_s = time.perf_counter() - t0
    paths = set()
    t1 = time.perf_counter()
    for _ in range(steps):
        info = world.step()
        paths.update(f"{p.forward_mode}:{p.path}" for p in info.passes)
    _drain(world.device)
    graphs = sum(len(r.graphs) for r in world.runners.values())
    return {
        "mode": mode, "batch_size": batch_size, "graphs": graphs, "capture_s": round(capture_s, 2),
        "step_ms": round((time.perf_counter() - t1) * 1000 / steps, 2), "paths": sorted(paths),
        "forward_us_measured": round(world.standin.measure_us(), 1),
        "ok": graphs > 0 and any(p.endswith(":graph") for p in paths),
    }  # fmt: skip


def _table(rows: list[dict], cols: list[str]) -> str:
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--model", default="flash", choices=["flash", "pro"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--quick", action="store_true", help="skip the full-capture phase")
    ap.add_argument("--max-buckets", type=int, default=12, help="per mode; sampled evenly")


@check(
    "serving",
    "the serving world's CUDA graphs (capture and replay) against the emulated device",
    configure=_configure,
    in_all=True,
    needs_cuda=True,
)
def run_check(args: argparse.Namespace) -> int:
    files = result_files(args.out, ("gpucheck.txt", "gpucheck.json"))
    root = Path(__file__).resolve().parents[2]
    sizes = scenario_batch_sizes(root)
    t0 = time.perf_counter()
    rows = []
    for mode, spec in (("nonspec", False), ("specv2", True)):
        used = buckets_used(spec, sizes["nonspec" if not spec else "spec"])
        if len(used) > args.max_buckets:  # sample evenly, keep both ends
            step = (len(used) - 1) / (args.max_buckets - 1)
            used = sorted({used[round(i * step)] for i in range(args.max_buckets)})
        for b in used:
            row = check_bucket(mode, b, args.model, args.seed)
            print(f"  {mode} bucket {b}: {'ok' if row['ok'] else 'FAIL'}", flush=True)
            rows.append(row)
    full = []
    if not args.quick:
        for mode, bs in (("nonspec", 64), ("specv2", 32)):
            full.append(check_full_capture(mode, bs, args.model, args.seed, steps=8))
    text = [
        f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  model {args.model}",
        "",
        "per-bucket capture + replay vs emulated device (metadata after replay):",
        _table(rows, ["mode", "bucket", "raw_bs", "graph_passes", "fields", "mismatched",
                      "reference", "capture_s", "ok"]),
    ]  # fmt: skip
    if full:
        text += ["", "full bucket list capture (upstream 'all'):"]
        text.append(_table(full, ["mode", "batch_size", "graphs", "capture_s", "step_ms",
                                  "forward_us_measured", "paths", "ok"]))  # fmt: skip
    ok = all(r["ok"] for r in rows) and all(r["ok"] for r in full)
    text += ["", f"{'PASS' if ok else 'FAIL'} in {time.perf_counter() - t0:.1f} s"]
    report = "\n".join(text)
    print(report)
    write_atomic(files["gpucheck.txt"], report + "\n")
    write_json(files["gpucheck.json"], {"ok": ok, "buckets": rows, "full_capture": full})
    return 0 if ok else 1
