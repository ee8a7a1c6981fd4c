"""Compare a count pass with its baseline, exactly, per key; one case per scenario cell."""

from __future__ import annotations

from collections import Counter

from harness.gate.baseline import KEY_FIELDS, Baseline, Key, Observed, cell_id
from harness.results.tables import MEASURED_PATHS
from harness.scenario import LoadedScenario
from syncledger.snapshot_verdict import Change, Suite, compare_key

REMAKE = "python -m harness baseline --device emu"


def _key_cell(key: Key) -> str:
    d = dict(zip(KEY_FIELDS, key))
    return cell_id(d["case"], d["variant"], d["mirror"], d["batch_size"], d["rank"])


def _key_text(key: Key) -> str:
    d = dict(zip(KEY_FIELDS, key))
    parts = [
        d["case"],
        d["variant"],
        d["mirror"] and f"mirror={d['mirror']}",
        d["batch_size"] and f"bs={d['batch_size']}",
        d["rank"] and f"rank={d['rank']}",
    ]
    return f"{'/'.join(str(p) for p in parts if p)} {_key_within(key)}"


def _key_within(key: Key) -> str:
    """The key inside its cell: forward mode, path and region."""
    d = dict(zip(KEY_FIELDS, key))
    return f"{d['forward_mode'] or '-'} path={d['path']} region={d['region'] or '-'}"


def _per_step(n: int, key: Key, steps: int, what: str = "") -> str:
    if key[KEY_FIELDS.index("path")] not in MEASURED_PATHS or not steps:
        return ""
    return f" ({n / steps:.2f} {what}per measured step)"


def compare(
    loaded: LoadedScenario, cur: Observed, base: Baseline, measured_only: bool = False
) -> Suite:
    """Exact per-key comparison. `measured_only`: gate graph/eager steps alone — for a run on
    another device than the baseline's, whose set-up differs by design (CUDA-graph capture
    synchronizes and empties the cache, the stand-in forward is calibrated with events).
    Whether a change fails is the verdict's tier (strict, warn-only), not decided here."""
    suite = Suite(loaded.name, str(base.path), REMAKE)
    _compare_outcomes(suite, cur, base)
    keys = sorted(set(cur.counts) | set(base.counts))
    if measured_only:
        keys = [k for k in keys if k[KEY_FIELDS.index("path")] in MEASURED_PATHS]
        suite.notes.append("set-up, capture and warm-up paths not gated (device differs)")
    suite.keys = len(keys)
    cells = set(base.outcomes) | set(cur.outcomes) | {_key_cell(k) for k in keys}
    suite.cases = sorted(cells)
    steps = loaded.scenario.steps.count
    for key in keys:
        was, now = base.events.get(key, Counter()), cur.events.get(key, Counter())
        now_n, was_n = cur.counts.get(key, 0), base.counts.get(key, 0)

        def locate(site: str, key: Key = key) -> tuple[tuple[str, ...], tuple[str, ...]]:
            where = tuple(cur.where_by_sig.get(site, ()))
            return where, tuple(cur.stacks_by_sig.get((key, site), ()))

        compare_key(
            suite,
            _key_cell(key),
            _key_within(key),
            _key_text(key),
            (was_n, was),
            (now_n, now),
            locate,
            more=_per_step(now_n - was_n, key, steps, "more "),
        )
    return suite


def _compare_outcomes(suite: Suite, cur: Observed, base: Baseline) -> None:
    def add(cid: str, was: str | None, now: str | None, text: str, regression: bool) -> None:
        suite.changes.append(Change(cid, "outcome", was, now, text, regression))

    for cid in sorted(set(base.outcomes) | set(cur.outcomes)):
        was, now = base.outcomes.get(cid), cur.outcomes.get(cid)
        failure = cur.failures.get(cid, now)
        if was == now:
            continue
        if now is None:
            add(cid, was, now, f"cell {cid} no longer runs (baseline: {was})", False)
        elif was is None:
            text = f"new cell {cid}: {failure} (not in the baseline)"
            add(cid, was, now, text, now != "ok")
        elif was == "ok":
            add(cid, was, now, f"cell {cid} now fails: {failure} (baseline: ok)", True)
        elif now == "ok":
            add(cid, was, now, f"cell {cid} now runs (baseline: {was})", False)
        else:
            text = f"cell {cid} fails differently: {failure} (baseline: {was})"
            add(cid, was, now, text, False)
