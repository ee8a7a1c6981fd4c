"""`results/baselines/<scenario>.json`: the gated sync counts of a scenario's count pass.

Format (version 4):

    {
      "format": "dsv4-harness-baseline", "format_version": 4,
      "scenario": "nonspec", "scenario_file": "scenarios/nonspec.yaml",
      "config_sha256": "<sha256 of the validated scenario config>",
      "device": "emu", "seed": 1234, "warmup_steps": 2, "measured_steps": 16,
      "generated_by": "python -m harness baseline --device emu",
      "outcomes": {"<cell>": "ok" | "<Exception> in <function> (<file>)"},
      "counts": [
        {"case": "", "variant": "after", "mirror": "auto", "batch_size": 8, "rank": 0,
         "forward_mode": "DECODE", "path": "graph", "region": "step/metadata/out_graph",
         "syncs": 16, "events": {"d2h_read item in build (harness/backend/x.py)": 16}},
        ...
      ]
    }

A cell is named by the keys its world fills: `<variant>/<mirror>/<batch_size>` in the serving
world, `<case>/<batch_size>` in the sync-cost experiment (`/rank<r>` after a rank other than
0). `syncs` is an exact integer: the total over the cell's steps of that path (setup, warm-up
or the measured steps; all seeded and deterministic), so per measured step it is
syncs / measured_steps. The gate compares `syncs` exactly per key (case, variant, mirror,
batch_size, rank, forward_mode, path, region) — the batch size is part of the key so a gain at
one size cannot hide a loss at another. `events` (signature -> count) names the sync sites, so
that the gate can name what is new when a count grows (with the current `file:line` and stack).
Neither signatures nor outcomes hold line numbers: code that moves leaves the baseline file
unchanged, and its diff shows only what a reviewer must judge (counts, sites, outcomes).
Zero-sync keys are kept: every region a step entered.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.results.files import write_json
from harness.results.tables import COLUMNS
from harness.runner.count_pass import PassRows
from harness.scenario import LoadedScenario
from harness.scenario.loader import REPO_ROOT
from syncledger.snapshot_file import read_json
from syncledger.snapshot_verdict import signature, site_file

FORMAT = "dsv4-harness-baseline"
FORMAT_VERSION = 4
DEFAULT_DIR = Path("results/baselines")
KEY_FIELDS = (
    "case", "variant", "mirror", "batch_size", "rank", "forward_mode", "path", "region",
)  # fmt: skip

Key = tuple[str, str, str, int, int, str, str, str]


# Keys that cannot change a count pass: editing them must not make the baselines stale.
NOT_COUNTED = ("description", "steps.time", "steps.time_emu", "steps.round_steps")


def baseline_path(folder: Path, scenario: str) -> Path:
    """Where the baseline of `scenario` lives in `folder`."""
    return Path(folder) / f"{scenario}.json"


def counted_config(loaded: LoadedScenario) -> dict[str, Any]:
    cfg = loaded.effective()
    for dotted in NOT_COUNTED:
        *parents, leaf = dotted.split(".")
        node = cfg
        for p in parents:
            node = node.get(p) or {}
        node.pop(leaf, None)
    return cfg


def config_sha256(loaded: LoadedScenario) -> str:
    """Hash of the configuration the counts depend on (the baseline is stale when it moves)."""
    blob = json.dumps(counted_config(loaded), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def repo_relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def outcome_status(status: str, exception: str, location: str, function: str) -> str:
    """A cell's outcome as the baseline keeps it (no line number, as for signatures)."""
    return "ok" if status == "ok" else f"{exception} in {function} ({site_file(location)})"


@dataclass
class Observed:
    """A count pass reduced to what the gate compares, plus what names a change for a reader:
    where each site is now (file:line) with a stack, and each failing cell's exception there."""

    counts: dict[Key, int] = field(default_factory=dict)
    events: dict[Key, Counter[str]] = field(default_factory=dict)
    where_by_sig: dict[str, list[str]] = field(default_factory=dict)
    stacks_by_sig: dict[tuple[Key, str], list[str]] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def cell_id(case: str, variant: str, mirror: str, batch_size: int, rank: int) -> str:
    """The cell's name: the keys its world fills, then the rank other than 0."""
    parts = [case, variant, mirror, str(batch_size) if batch_size else ""]
    return "/".join(p for p in parts if p) + (f"/rank{rank}" if rank else "")


def observe(rows: PassRows) -> Observed:
    obs = Observed()
    cols = {t: COLUMNS[t] for t in ("counts", "syncs", "outcomes")}
    for row in rows.counts:
        r = dict(zip(cols["counts"], row))
        key = _key(r)
        obs.counts[key] = obs.counts.get(key, 0) + int(r["syncs"])
    for row in rows.syncs:
        r = dict(zip(cols["syncs"], row))
        key = _key(r)
        sig = signature(r["kind"], r["op"], r["location"], r["function"])
        obs.events.setdefault(key, Counter())[sig] += 1
        where = f"{r['kind']} {r['op']} at {r['location']} in {r['function']}"
        if where not in obs.where_by_sig.setdefault(sig, []):
            obs.where_by_sig[sig].append(where)
        obs.stacks_by_sig.setdefault((key, sig), rows.stacks.get(r["stack_id"], []))
    for row in rows.outcomes:
        r = dict(zip(cols["outcomes"], row))
        cid = cell_id(r["case"], r["variant"], r["mirror"], int(r["batch_size"]), int(r["rank"]))
        obs.outcomes[cid] = outcome_status(
            r["status"], r["exception"], r["location"], r["function"]
        )
        if r["status"] != "ok":
            obs.failures[cid] = f"{r['exception']} at {r['location']} in {r['function']}"
    return obs


def _key(r: dict[str, Any]) -> Key:
    return (
        r["case"],
        r["variant"],
        r["mirror"],
        int(r["batch_size"]),
        int(r["rank"]),
        r["forward_mode"],
        r["path"],
        r["region"],
    )


def to_json(loaded: LoadedScenario, obs: Observed, device: str) -> dict[str, Any]:
    sc = loaded.scenario
    counts = []
    for key in sorted(obs.counts):
        entry: dict[str, Any] = dict(zip(KEY_FIELDS, key))
        entry["syncs"] = obs.counts[key]
        if obs.events.get(key):
            entry["events"] = dict(sorted(obs.events[key].items()))
        counts.append(entry)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "scenario": sc.name,
        "scenario_file": repo_relative(loaded.path),
        "config_sha256": config_sha256(loaded),
        "device": device,
        "seed": sc.seed,
        "warmup_steps": sc.steps.warmup,
        "measured_steps": sc.steps.count,
        "generated_by": f"python -m harness baseline --device {device}",
        "config": loaded.effective(),
        "outcomes": dict(sorted(obs.outcomes.items())),
        "counts": counts,
    }


def write_baseline(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)


@dataclass
class Baseline:
    path: Path
    data: dict[str, Any]
    counts: dict[Key, int]
    events: dict[Key, Counter[str]]
    outcomes: dict[str, str]

    @property
    def measured_steps(self) -> int:
        return int(self.data["measured_steps"])


def load_baseline(path: Path) -> Baseline:
    """Read and check a baseline; missing or malformed is an InputError (exit 2)."""
    where = str(path)
    if not path.is_file():
        raise InputError(
            "missing baseline; create it with `python -m harness baseline --device emu`",
            file=where,
        )
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"not a baseline (format is not {FORMAT!r})", file=where, key="format")
    if data.get("format_version") != FORMAT_VERSION:
        raise InputError(
            f"unsupported version {data.get('format_version')!r} (expected {FORMAT_VERSION})",
            file=where,
            key="format_version",
        )
    for k in ("scenario", "config_sha256", "measured_steps", "outcomes", "counts"):
        if k not in data:
            raise InputError("missing key", file=where, key=k)
    counts: dict[Key, int] = {}
    events: dict[Key, Counter[str]] = {}
    if not isinstance(data["counts"], list):
        raise InputError("expected a list", file=where, key="counts")
    for i, entry in enumerate(data["counts"]):
        try:
            key: Key = (
                str(entry["case"]),
                str(entry["variant"]),
                str(entry["mirror"]),
                int(entry["batch_size"]),
                int(entry.get("rank", 0)),
                str(entry["forward_mode"]),
                str(entry["path"]),
                str(entry["region"]),
            )
            n = entry["syncs"]
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ValueError(f"syncs must be a non-negative integer, got {n!r}")
            if key in counts:
                raise ValueError(f"a second entry for key {dict(zip(KEY_FIELDS, key))}")
            counts[key] = n
            events[key] = Counter({str(s): int(c) for s, c in entry.get("events", {}).items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"malformed entry ({exc})", file=where, key=f"counts[{i}]") from exc
    if not isinstance(data["outcomes"], dict):
        raise InputError("expected a mapping", file=where, key="outcomes")
    return Baseline(
        path, data, counts, events, {str(k): str(v) for k, v in data["outcomes"].items()}
    )


__all__ = [
    "DEFAULT_DIR",
    "Baseline",
    "Observed",
    "baseline_path",
    "config_sha256",
    "load_baseline",
    "observe",
    "to_json",
    "write_baseline",
]
