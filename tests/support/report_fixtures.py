"""A synthetic run folder of the serving world in the runner's format
(harness/results/tables.py), for report tests.

Small and seeded: it exercises every figure (graph and eager paths, several forward modes, a
failed cell, stale-mirror findings, nested per-region host times in exit order as the time
pass writes them, with their rounds) without running the harness. Rows of a step outside any
forward pass carry the step's forward mode (DECODE, or EXTEND in a prefill step) and the path
of the target model's pass (as the serving world tags them); the time pass's iteration rows
"eager" when any pass of the step ran eagerly, else "graph"; warm-up rows "warmup", and the
cell's set-up (step -1) "setup" / "capture", as the runner writes them.
With `legacy_setup_path=True` measured scheduler rows say "setup" instead (the runner's
first format), which the report must read the same.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path

import numpy as np

from harness.results.run_folder import RunFolder
from harness.results.tables import COLUMNS, FORMAT_VERSION

VARIANTS = ("before", "after", "dropped")
_KEYS = (
    "scenario", "variant", "mirror", "batch_size", "rank", "step", "forward_mode", "path", "region",
)  # fmt: skip
_CELL = _KEYS[:5]
# The order in which this module builds its row tuples (written by name, see _write_folder).
_FIXTURE_COLUMNS = {
    "counts": (*_KEYS, "syncs"),
    "syncs": (*_KEYS, "kind", "op", "location", "function", "stack_id", "nbytes"),
    "latency": (*_KEYS, "device", "metric", "value", "unit", "round", "traced"),
    "outcomes": (
        *_CELL,
        "pass",
        "status",
        "mirror_effective",
        "steps_done",
        "exception",
        "message",
        "location",
        "function",
        "wall_s",
    ),
    "findings": (*_CELL, "pass", "step", "kind", "detail", "forward_mode", "path"),
    "waits": (*_KEYS, "site", "kind", "wait_ns", "start_us", "idle_after_us", "traced"),
}
_DEFAULTS = {"process": 0}  # one process; a column the fixture leaves out is "" otherwise
BUCKET_MAX = 64  # batch sizes above this run decode/verify eagerly
WARMUP = 2
ROUND_STEPS = 4  # measured steps per cell in a round of the time pass
TRACED_STEPS = 2  # on "cuda": steps of a traced round after the others
# site -> (region, kind, op, location, function)
_SITES = {
    "mirror": (
        "step/scheduler/mirror",
        "d2h_read",
        "aten::_to_copy",
        "harness/serving/mirror.py:150",
        "blocking_copy",
    ),
    "max_len": (
        "step/metadata/eager",
        "d2h_read",
        "aten::item",
        "harness/backend/metadata.py:141",
        "_build_forward_metadata",
    ),
    "verify_list": (
        "step/metadata/out_graph",
        "d2h_read",
        "aten::tolist",
        "harness/backend/verify.py:57",
        "verify_lengths",
    ),
    "pad": (
        "step/metadata/eager",
        "d2h_read",
        "aten::item",
        "harness/backend/expand.py:33",
        "expand_prefill",
    ),
}


def _passes(scenario: str, step: int, bs: int) -> list[tuple[str, str]]:
    path = "graph" if bs <= BUCKET_MAX else "eager"
    if scenario == "nonspec":
        return [("EXTEND", "eager")] if step % 4 == 3 else [("DECODE", path)]
    return [("DRAFT_EXTEND", "eager"), ("DECODE", path), ("TARGET_VERIFY", path)]


def _sites(scenario: str, variant: str, mode: str, path: str) -> list[str]:
    out = ["max_len"] if variant != "dropped" and path == "eager" else []
    if variant == "before" and mode == "TARGET_VERIFY":
        out.append("verify_list")
    if mode == "DRAFT_EXTEND":
        out.append("pad")
    return out


def _pass_regions(path: str) -> list[str]:
    """Regions of one forward pass in exit order (children before their parent)."""
    if path == "graph":
        return [
            "step/metadata/out_graph",
            "step/graph/replay/metadata/in_graph",
            "step/graph/replay/forward",
            "step/graph/replay",
        ]
    return ["step/metadata/eager", "step/forward"]


def write_run(
    root: Path,
    scenario: str = "eagle",
    *,
    device: str = "cuda",
    batch_sizes: tuple[int, ...] = (1, 8, 64, 96),
    steps: int = 12,
    seed: int = 0,
    run_id: str = "20260101T000000Z-0000",
    start_time: str = "2026-01-01T00:00:00+00:00",
    legacy_setup_path: bool = False,
) -> Path:
    """Write a complete synthetic run folder root/<scenario>/<run_id>; return its path."""
    rng = np.random.default_rng(seed)
    t: dict[str, list[tuple]] = {name: [] for name in _FIXTURE_COLUMNS}
    stacks: dict[str, list[str]] = {}
    for variant in VARIANTS:
        for bs in batch_sizes:
            cell = (scenario, variant, "auto", bs, 0)
            failed = variant == "before" and bs == batch_sizes[-1] and scenario == "nonspec"
            _outcome_rows(t, cell, failed, steps)
            if not failed:
                _setup_rows(t, stacks, cell, device)
                for step in range(WARMUP + steps):
                    _step_rows(t, stacks, rng, cell, step, device, legacy_setup_path)
                if device == "cuda":
                    _traced_rows(t, cell, WARMUP + steps)
    meta = _meta(scenario, device, seed, run_id, start_time)
    return _write_folder(Path(root) / scenario / run_id, t, stacks, meta)


def reseal(folder: Path, *names: str) -> None:
    """Record files of a run folder edited on purpose in its meta.json, as if the run had
    written them so (tests of what the readers do with well-formed but odd content)."""
    meta = json.loads((folder / "meta.json").read_text())
    for name in names:
        data = (folder / name).read_bytes()
        meta["sha256"][name] = hashlib.sha256(data).hexdigest()
        if name.endswith(".csv"):
            meta["rows"][name.removesuffix(".csv")] = max(len(data.splitlines()) - 1, 0)
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))


def drop_time_pass(folder: Path) -> None:
    """Make the run a `--pass count` run: latency.csv holds its header only."""
    path = folder / "latency.csv"
    path.write_text(path.read_text().splitlines()[0] + "\n")
    reseal(folder, "latency.csv")


def _outcome_rows(t: dict, cell: tuple, failed: bool, steps: int) -> None:
    exc = (
        ("AssertionError", "seq_lens_cpu is None", "harness/backend/metadata.py:120", "_build_forward_metadata")
        if failed
        else ("", "", "", "")
    )  # fmt: skip
    done = 1 if failed else WARMUP + steps
    for pass_ in ("count", "time"):
        t["outcomes"].append(
            (*cell, pass_, "error" if failed else "ok", "present", done, *exc, 0.1)
        )


def _setup_rows(t: dict, stacks: dict, cell: tuple, device: str) -> None:
    """A capture sync, and the set-up's host time (never per step)."""
    t["counts"].append((*cell, -1, "DECODE", "capture", "step/metadata/out_graph", 1))
    key = (*cell, -1, "DECODE", "capture")
    _sync_rows(t, stacks, key, "max_len", cell[3], 1, "step/metadata/out_graph")
    t["latency"].append((*cell, -1, "", "capture", "warmup_and_capture", device, "host", 5e4, "us"))


def _step_rows(t, stacks, rng, cell: tuple, step: int, device: str, legacy: bool) -> None:
    """Counts and syncs of one scheduler step; after warm-up also its times and findings."""
    scenario, variant, _mirror, bs, _rank = cell
    warm = step < WARMUP
    passes = _passes(scenario, step, bs)
    step_path = "eager" if any(p == "eager" for _m, p in passes) else "graph"
    if warm:
        t["latency"].append((*cell, step, "", "warmup", "iteration", device, "host", 1e5, "us"))
    # scheduler regions are outside any forward pass: the step's mode, the target pass's path
    step_mode = "EXTEND" if ("EXTEND", "eager") in passes else "DECODE"
    target = "eager" if step_mode == "EXTEND" or bs > BUCKET_MAX else "graph"
    sched_path = "warmup" if warm else "setup" if legacy else target
    n_syncs = _scheduler_rows(t, stacks, (*cell, step, step_mode, sched_path))
    for mode, path in passes:
        n_syncs += _pass_rows(t, stacks, (*cell, step, mode, "warmup" if warm else path), path)
    if warm:
        return
    _time_rows(t, rng, cell, step, passes, device, n_syncs, bs, (step_mode, sched_path, step_path))
    if variant != "dropped" and scenario != "nonspec" and step % 5 == 2:
        detail = "graph runner seq_lens_cpu holds step 0 values"
        finding = (*cell, "count", step, "stale_mirror", detail, "TARGET_VERIFY")
        t["findings"].append((*finding, step_path))


def _traced_rows(t: dict, cell: tuple, first: int) -> None:
    """Steps of a traced round: the iteration's metrics with the device's busy time and span,
    and each synchronizing call with the device idle after it (the mirror's read: 8 µs of
    waiting, then 600 µs of idle; the results' event wait: 5 µs, 20 µs)."""
    rnd = 100
    for step in range(first, first + TRACED_STEPS):
        it = (*cell, step, "", "graph", "iteration", "cuda")
        for metric, value in (("host", 300.0), ("device", 900.0), ("e2e", 930.0),
                              ("busy", 250.0), ("span", 900.0)):  # fmt: skip
            t["latency"].append((*it, metric, value, "us", rnd, 1))
        calls = [("step/scheduler/process_result", "harness/serving/world.py:312", 5e3, 20.0)]
        if cell[1] != "dropped":
            mirror = ("step/scheduler/mirror", "harness/serving/mirror.py:126", 8e3, 600.0)
            calls.insert(0, mirror)
        for region, site, wait_ns, idle in calls:
            key = (*cell, step, "DECODE", "graph", region)
            t["waits"].append((*key, site, "explicit", wait_ns, 10.0, idle, 1))


def _scheduler_rows(t: dict, stacks: dict, sched: tuple) -> int:
    """Scheduler regions, outside any forward pass; returns their syncs."""
    scenario, bs = sched[0], sched[3]
    mirror_syncs = int(scenario != "nonspec")
    t["counts"].append((*sched, "step", 0))
    t["counts"].append((*sched, "step/scheduler/mirror", mirror_syncs))
    t["counts"].append((*sched, "step/scheduler/prepare", 0))
    _sync_rows(t, stacks, sched, "mirror", bs, mirror_syncs, "step/scheduler/mirror")
    return mirror_syncs


def _pass_rows(t: dict, stacks: dict, key: tuple, path: str) -> int:
    """Counts and syncs of one forward pass run on `path` (graph or eager; the key says
    "warmup" for warm-up steps); returns its syncs."""
    scenario, variant, bs, mode = key[0], key[1], key[3], key[6]
    per_region = {r: 0 for r in _pass_regions(path)}
    for site in _sites(scenario, variant, mode, path):
        reg = _SITES[site][0]
        reg = reg if reg in per_region else "step/metadata/eager"  # eager verify
        per_region[reg] += 1
        _sync_rows(t, stacks, key, site, bs, 1, reg)
    t["counts"].extend((*key, r, n) for r, n in per_region.items())
    return sum(per_region.values())


def _meta(scenario: str, device: str, seed: int, run_id: str, start_time: str) -> dict:
    return {
        "result_format": "dsv4-harness-run",
        "result_format_version": FORMAT_VERSION,
        "status": "incomplete",
        "complete": False,
        "run_id": run_id,
        "command": f"python -m harness bench --scenario {scenario} --device {device}",
        "start_time": start_time,
        "git_commit": "0" * 40,
        "device_kind": device,
        "gpu_name": "NVIDIA H200" if device == "cuda" else None,
        "torch_version": "2.13.0",
        "name": scenario,
        "scenario": scenario,
        "world": "serving",
        "seed": seed,
    }


def _write_folder(path: Path, t: dict, stacks: dict, meta: dict) -> Path:
    """Through the runner's own writer, so meta.json holds every file's checksum."""
    path.mkdir(parents=True, exist_ok=True)
    folder = RunFolder(path, meta)
    for name, rows in t.items():
        # map by column name onto the runner's current columns: one it adds stays empty
        mine = _FIXTURE_COLUMNS[name]
        folder.write_table(
            name,
            (
                tuple(dict(zip(mine, r)).get(c, _DEFAULTS.get(c, "")) for c in COLUMNS[name])
                for r in rows
            ),
        )
    folder.write_json("stacks.json", stacks)
    folder.finish()
    return path


def _sync_rows(t: dict, stacks: dict, key: tuple, site: str, bs: int, n: int, region: str):
    _, kind, op, loc, fn = _SITES[site]
    sid = f"{zlib.crc32(f'{loc}:{fn}'.encode()):08x}"
    stacks[sid] = [f"{loc} in {fn}", "harness/serving/world.py:210 in step"]
    t["syncs"].extend([(*key, region, kind, op, loc, fn, sid, 8 * bs)] * n)


def _time_rows(t: dict, rng, cell, step: int, passes, device: str, n_syncs: int, bs: int, where):
    """Host time of every region exit (children first), then the iteration's host/device/e2e;
    `where`: the step's mode and path (rows outside a forward pass), and the iteration's path;
    every row its round."""
    sm, sp, ip = where
    rnd = (step - WARMUP) // ROUND_STEPS

    def host_us() -> float:
        return float(rng.lognormal(np.log(4 + 0.03 * bs), 0.3))

    rows = []
    sched_us = [host_us(), host_us()]
    rows.append((*cell, step, sm, sp, "step/scheduler/mirror", device, "host", sched_us[0], "us"))
    rows.append((*cell, step, sm, sp, "step/scheduler/prepare", device, "host", sched_us[1], "us"))
    total = sum(sched_us)
    for mode, path in passes:
        regs = _pass_regions(path)
        leaf = [host_us() for _ in regs]
        if path == "graph":  # replay holds in_graph and forward
            leaf[3] = leaf[1] + leaf[2] + 1.0
            total += leaf[0] + leaf[3]
        else:
            total += sum(leaf)
        rows.extend(
            (*cell, step, mode, path, r, device, "host", v, "us") for r, v in zip(regs, leaf)
        )
    step_us = total + 2.0
    rows.append((*cell, step, sm, sp, "step", device, "host", step_us, "us"))
    it = (*cell, step, "", ip, "iteration", device)
    rows.append((*it, "host", step_us + 1.0, "us"))
    if device == "cuda":
        dev_us = 800 + 2 * bs + rng.normal(0, 5)
        rows.append((*it, "device", dev_us, "us"))
        rows.append((*it, "e2e", dev_us + 25 * n_syncs + rng.exponential(8), "us"))
    t["latency"].extend((*r, rnd) for r in rows)
