"""What `bench` prints for a sync-cost run: whether the ledger saw exactly k syncs per step of
the injected kind, and µs per sync per forward duration and kind, with their intervals."""

from __future__ import annotations

import pandas as pd

from harness.results.load import RunData
from harness.results.samples import headline_metric, step_times
from harness.results.summary import failed_section, findings_section, interval_text
from harness.synccost.analysis import count_problems, sync_costs


def sync_cost_table(steps: pd.DataFrame, metric: str) -> str:
    """One row per forward duration, batch size and kind: µs per sync with its interval."""
    rows = [
        {
            "forward_us": f"{c.forward_us:g}",
            "bs": c.batch_size,
            "kind": c.kind,
            "p50 at k=0": f"{c.medians[0].estimate:.1f}" if 0 in c.medians else "n/a",
            f"µs per sync (slope over k={','.join(map(str, c.ks))})": interval_text(c.per_sync),
            "first sync": interval_text(c.first),
            "each further sync": interval_text(c.further),
        }
        for c in sync_costs(steps, metric)
    ]
    return pd.DataFrame(rows).to_string(index=False) if rows else "(no cell with k > 0)"


def sync_cost_lines(run: RunData) -> list[str]:
    """Whether the ledger saw exactly k syncs per step, and µs per sync per forward duration
    and kind."""
    steps = step_times(run.latency)
    if run.counts.empty and steps.empty:
        return []
    lines = ["What one sync costs (the sync-cost experiment):"]
    if not run.counts.empty:
        problems = count_problems(run.counts, run.syncs)
        lines.append(
            "count pass: every cell made exactly k syncs per step, of the injected kind"
            if not problems
            else "count pass MISMATCH (the ledger and the injection disagree):"
        )
        lines.extend(f"  {p}" for p in problems)
    if steps.empty:
        return [*lines, "(no time pass: no cost per sync)"]
    metric = headline_metric(steps)
    note = " — emulated device: host time only, no pipeline bubble" if run.is_emulated else ""
    lines.append(f"{metric} time per step, µs{note}; 95% bootstrap CI, paired by step:")
    return [*lines, sync_cost_table(steps, metric)]


def sync_cost_summary(run: RunData) -> list[str]:
    lines = sync_cost_lines(run)
    return [*lines, *failed_section(run), *findings_section(run)]
