"""Compare a count pass with its baseline, exactly, per key."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.gate.baseline import KEY_FIELDS, Baseline, Key, Observed
from harness.results.tables import MEASURED_PATHS
from harness.scenario import LoadedScenario

STACK_LINES = 8
MAX_LINES = 40
REMAKE = "python -m harness baseline --device emu"


@dataclass
class GateResult:
    scenario: str
    strict: bool = False
    # more syncs at a key, or a cell that now fails: always a failure (one line each)
    regressions: list[str] = field(default_factory=list)
    # new event signature -> (extra events, keys it grew at, a stack)
    new_events: dict[str, tuple[int, int, list[str]]] = field(default_factory=dict)
    # any other difference (fewer syncs, other sync sites, a cell that now runs or fails
    # differently): a pass for users, a failure in strict mode (CI), so a detector that goes
    # blind cannot pass
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    keys: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.regressions) or (self.strict and bool(self.changes))


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
    loaded: LoadedScenario,
    cur: Observed,
    base: Baseline,
    measured_only: bool = False,
    strict: bool = False,
) -> GateResult:
    """Exact per-key comparison. `measured_only`: gate graph/eager steps alone — for a run on
    another device than the baseline's, whose set-up differs by design (CUDA-graph capture
    synchronizes and empties the cache, the stand-in forward is calibrated with events).
    `strict`: any difference fails, not only more syncs or newly failing cells."""
    res = GateResult(loaded.name, strict=strict)
    _compare_outcomes(res, cur, base)
    keys = sorted(set(cur.counts) | set(base.counts))
    if measured_only:
        keys = [k for k in keys if k[KEY_FIELDS.index("path")] in MEASURED_PATHS]
        res.notes.append("set-up, capture and warm-up paths not gated (device differs)")
    res.keys = len(keys)
    steps = loaded.scenario.steps.count
    for key in keys:
        _compare_key(res, key, cur, base, steps)
    return res


def _compare_outcomes(res: GateResult, cur: Observed, base: Baseline) -> None:
    for cid in sorted(set(base.outcomes) | set(cur.outcomes)):
        was, now = base.outcomes.get(cid), cur.outcomes.get(cid)
        failure = cur.failures.get(cid, now)
        if was == now:
            continue
        if now is None:
            res.changes.append(f"cell {cid} no longer runs (baseline: {was})")
        elif was is None:
            (res.changes if now == "ok" else res.regressions).append(
                f"new cell {cid}: {failure} (not in the baseline)"
            )
        elif was == "ok":
            res.regressions.append(f"cell {cid} now fails: {failure} (baseline: ok)")
        elif now == "ok":
            res.changes.append(f"cell {cid} now runs (baseline: {was})")
        else:
            res.changes.append(f"cell {cid} fails differently: {failure} (baseline: {was})")


def _compare_key(res: GateResult, key: Key, cur: Observed, base: Baseline, steps: int) -> None:
    now_n, was_n = cur.counts.get(key, 0), base.counts.get(key, 0)
    if now_n > was_n:
        res.regressions.append(
            f"{_key_text(key)}: {was_n} -> {now_n} syncs"
            f"{_per_step(now_n - was_n, key, steps, 'more ')}"
        )
        grown = _grown(key, cur, base) or cur.events.get(key, Counter())
        for sig, extra in grown.items():
            n, k, stack = res.new_events.get(sig, (0, 0, []))
            res.new_events[sig] = (n + extra, k + 1, stack or cur.stacks_by_sig.get((key, sig), []))
    elif now_n < was_n:
        res.changes.append(f"{_key_text(key)}: {was_n} -> {now_n} syncs (fewer)")
    else:
        now_ev, was_ev = cur.events.get(key, Counter()), base.events.get(key, Counter())
        if now_ev != was_ev:
            added = ", ".join(sorted(now_ev - was_ev))
            gone = ", ".join(sorted(was_ev - now_ev))
            res.changes.append(
                f"{_key_text(key)}: {now_n} syncs at other sites (now: {added}; baseline: {gone})"
            )


def format_result(res: GateResult, baseline_path: str, where_by_sig: dict[str, list[str]]) -> str:
    """The gate's report of one scenario; `where_by_sig` names each new sync's current
    location(s) (Observed.where_by_sig)."""
    status = "FAIL" if res.failed else "ok"
    lines = [
        f"gate {res.scenario}: {status} — {res.keys} keys, {len(res.regressions)} regressed, "
        f"{len(res.changes)} changed otherwise" + (" (strict)" if res.strict else "")
    ]
    lines.extend(f"  note: {note}" for note in res.notes)
    if res.regressions:
        lines.append(f"  REGRESSED vs {baseline_path} (more syncs, or cells that now fail):")
        lines.extend(_capped(res.regressions))
    if res.new_events:
        lines.append("  new sync events (kind op at file:line in function), each with a stack:")
        for sig, (n, k, stack) in sorted(res.new_events.items()):
            lines.append(
                f"    {'; '.join(where_by_sig.get(sig, [sig]))}  (+{n} events at {k} key(s))"
            )
            lines.extend(f"        {frame}" for frame in stack[:STACK_LINES])
    if res.changes and res.strict:
        lines.append(
            f"  CHANGED vs {baseline_path} (strict: any difference fails until the baseline is "
            f"re-made on purpose with `{REMAKE}`, and its diff reviewed):"
        )
        lines.extend(_capped(res.changes))
    elif res.changes:
        lines.append(
            f"  fewer syncs or other differences from {baseline_path}, which pass; the baseline "
            f"can be tightened with `{REMAKE}`:"
        )
        lines.extend(_capped(res.changes))
    return "\n".join(lines)


def _capped(items: list[str]) -> list[str]:
    lines = [f"    {t}" for t in items[:MAX_LINES]]
    if len(items) > MAX_LINES:
        lines.append(f"    ... and {len(items) - MAX_LINES} more")
    return lines
