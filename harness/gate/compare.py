"""Compare a count pass with its baseline, exactly, per key."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.gate.baseline import KEY_FIELDS, Baseline, Key, Observed
from harness.results.tables import MEASURED_PATHS
from harness.scenario import LoadedScenario

STACK_LINES = 8
MAX_LINES = 40


@dataclass
class GateResult:
    scenario: str
    regressions: list[str] = field(default_factory=list)  # one line per key or failing cell
    # new event signature -> (extra events, keys it grew at, a stack)
    new_events: dict[str, tuple[int, int, list[str]]] = field(default_factory=dict)
    tightenings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    keys: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.regressions)


def _key_text(key: Key) -> str:
    d = dict(zip(KEY_FIELDS, key))
    fm = d["forward_mode"] or "-"
    rank = f"/rank={d['rank']}" if d["rank"] else ""
    return (
        f"{d['variant']}/mirror={d['mirror']}/bs={d['batch_size']}{rank} {fm} "
        f"path={d['path']} region={d['region'] or '-'}"
    )


def _per_step(n: int, key: Key, steps: int, what: str = "") -> str:
    if key[KEY_FIELDS.index("path")] not in MEASURED_PATHS or not steps:
        return ""
    return f" ({n / steps:.2f} {what}per measured step)"


def _grown(key: Key, cur: Observed, base: Baseline) -> Counter[str]:
    """Event signatures at `key` whose count grew over the baseline's."""
    return cur.events.get(key, Counter()) - base.events.get(key, Counter())


def compare(
    loaded: LoadedScenario, cur: Observed, base: Baseline, measured_only: bool = False
) -> GateResult:
    """Exact per-key comparison. `measured_only`: gate graph/eager steps alone — for a run on
    another device than the baseline's, whose set-up differs by design (CUDA-graph capture
    synchronizes and empties the cache, the stand-in forward is calibrated with events)."""
    res = GateResult(loaded.name)
    steps = loaded.scenario.steps.count
    for cid, was in sorted(base.outcomes.items()):
        now = cur.outcomes.get(cid)
        if now is None:
            res.notes.append(f"cell {cid} no longer runs (baseline: {was})")
        elif was == "ok" and now != "ok":
            res.regressions.append(f"cell {cid} now fails: {now} (baseline: ok)")
        elif was != "ok" and now == "ok":
            res.tightenings.append(f"cell {cid} now runs (baseline: {was})")
    for cid, now in sorted(cur.outcomes.items()):
        if cid not in base.outcomes and now != "ok":
            res.regressions.append(f"new cell {cid} fails: {now}")
    keys = sorted(set(cur.counts) | set(base.counts))
    if measured_only:
        keys = [k for k in keys if k[KEY_FIELDS.index("path")] in MEASURED_PATHS]
        res.notes.append("set-up, capture and warm-up paths not gated (device differs)")
    res.keys = len(keys)
    for key in keys:
        now_n, was_n = cur.counts.get(key, 0), base.counts.get(key, 0)
        if now_n > was_n:
            res.regressions.append(
                f"{_key_text(key)}: {was_n} -> {now_n} syncs"
                f"{_per_step(now_n - was_n, key, steps, 'more ')}"
            )
            grown = _grown(key, cur, base) or cur.events.get(key, Counter())
            for sig, extra in grown.items():
                n, k, stack = res.new_events.get(sig, (0, 0, []))
                res.new_events[sig] = (
                    n + extra,
                    k + 1,
                    stack or cur.stacks_by_sig.get((key, sig), []),
                )
        elif now_n < was_n:
            res.tightenings.append(f"{_key_text(key)}: {was_n} -> {now_n} syncs")
    return res


def format_result(res: GateResult, baseline_path: str) -> str:
    lines = []
    status = "FAIL" if res.failed else "ok"
    lines.append(
        f"gate {res.scenario}: {status} — {res.keys} keys, {len(res.regressions)} regressed, "
        f"{len(res.tightenings)} fewer"
    )
    for note in res.notes:
        lines.append(f"  note: {note}")
    if res.regressions:
        lines.append(f"  REGRESSED vs {baseline_path} (more syncs, or cells that now fail):")
        lines.extend(f"    {r}" for r in res.regressions[:MAX_LINES])
        if len(res.regressions) > MAX_LINES:
            lines.append(f"    ... and {len(res.regressions) - MAX_LINES} more")
    if res.new_events:
        lines.append("  new sync events (kind op at location in function), each with a stack:")
        for sig, (n, k, stack) in sorted(res.new_events.items()):
            lines.append(f"    {sig}  (+{n} events at {k} key(s))")
            lines.extend(f"        {frame}" for frame in stack[:STACK_LINES])
    if res.tightenings:
        lines.append(
            f"  fewer syncs than the baseline ({baseline_path}); it can be tightened with "
            "`python -m harness baseline --device emu`:"
        )
        lines.extend(f"    {t}" for t in res.tightenings[:MAX_LINES])
        if len(res.tightenings) > MAX_LINES:
            lines.append(f"    ... and {len(res.tightenings) - MAX_LINES} more")
    return "\n".join(lines)
