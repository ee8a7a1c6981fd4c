"""What `bench` prints for a DP-attention run, and the tables behind it (result files only):
per-rank syncs, the exchange wait, and what one rank's planted sync costs every other rank.

A DP run's meta.json names its cells (``dp.cells``: label -> backend, forward_us, injected);
each label is the ``case`` column of that cell's rows and each rank's rows carry their
``rank``. The cost of the planted sync is the difference of medians of a rank's exchange wait
(host time of ``step/scheduler/dp_exchange``) with and without it, paired by step (every cell
runs the same seeded requests, so step k is the same work in both), with a percentile
bootstrap interval (harness.results.stats).
"""

from __future__ import annotations

import pandas as pd

from harness.results.load import CELL_KEYS, RunData
from harness.results.rates import measured
from harness.results.samples import UNMEASURED_TIME
from harness.results.stats import LEVEL, median_difference

EXCHANGE_REGION = "step/scheduler/dp_exchange"


def dp_cells(run: RunData) -> pd.DataFrame:
    """One row per DP cell: label, scenario, backend, forward_us, injected."""
    cells = run.meta.get("dp", {}).get("cells", {})
    scenario = run.meta.get("scenario")
    rows = [{"label": label, "scenario": scenario, **axes} for label, axes in cells.items()]
    return pd.DataFrame(rows, columns=["label", "scenario", "backend", "forward_us", "injected"])


def syncs_per_rank_step(run: RunData) -> pd.DataFrame:
    """Syncs of each measured step on each rank: label, rank, step, syncs."""
    m = measured(run.counts)
    cols = ["label", "rank", "step", "syncs"]
    if m.empty:
        return pd.DataFrame(columns=cols)
    out = m.groupby(["case", "rank", "step"], as_index=False)["syncs"].sum()
    return out.rename(columns={"case": "label"})[cols]


def syncs_by_rank_region(run: RunData) -> pd.DataFrame:
    """Mean syncs per measured step by (label, region) and rank (columns)."""
    m = measured(run.counts)
    if m.empty:
        return pd.DataFrame()
    steps = m.groupby(["case", "rank"])["step"].nunique()
    total = m.groupby(["case", "region", "rank"])["syncs"].sum()
    per = (total / steps.reindex(total.index.droplevel("region")).to_numpy()).rename("per_step")
    table = per.reset_index().pivot_table(
        index=["case", "region"], columns="rank", values="per_step", aggfunc="sum"
    )
    table.columns = [f"rank {int(c)}" for c in table.columns]
    return table[(table > 0).any(axis=1)]


def exchange_wait(run: RunData) -> pd.DataFrame:
    """Host time each rank spent in the exchange, per measured step: label, rank, step, us."""
    lat = run.latency
    cols = ["label", "rank", "step", "us"]
    keep = (
        (lat["region"] == EXCHANGE_REGION)
        & (lat["metric"] == "host")
        & ~lat["path"].isin(UNMEASURED_TIME)
        & (lat["step"] >= 0)
    )
    rows = lat[keep]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    out = rows.groupby(["case", "rank", "step"], as_index=False)["value_us"].sum()
    return out.rename(columns={"case": "label", "value_us": "us"})[cols]


def stall_answer(run: RunData) -> pd.DataFrame:
    """Per (backend, forward, rank): the exchange wait without and with the planted sync
    (medians, µs) and the difference with its interval."""
    cols = [
        "backend",
        "forward_us",
        "rank",
        "without_us",
        "with_us",
        "diff_us",
        "low_us",
        "high_us",
        "steps",
    ]
    cells = dp_cells(run)
    wait = exchange_wait(run)
    if cells.empty or wait.empty or not cells["injected"].any():
        return pd.DataFrame(columns=cols)
    rows = []
    for (backend, forward), group in cells.groupby(["backend", "forward_us"]):
        labels = {bool(r.injected): r.label for r in group.itertuples()}
        if set(labels) != {False, True}:
            continue
        base = wait[wait["label"] == labels[False]]
        treated = wait[wait["label"] == labels[True]]
        for rank in sorted(set(base["rank"]) & set(treated["rank"])):
            a = base[base["rank"] == rank].set_index("step")["us"]
            b = treated[treated["rank"] == rank].set_index("step")["us"]
            iv = median_difference(a, b)
            rows.append(
                [
                    backend,
                    forward,
                    int(rank),
                    a.median(),
                    b.median(),
                    iv.estimate,
                    iv.low,
                    iv.high,
                    iv.n,
                ]
            )
    return pd.DataFrame(rows, columns=cols)


def format_stall_answer(run: RunData) -> str:
    """The answer in words, one line per (backend, forward, other rank), then the table."""
    inject = run.meta.get("dp", {}).get("inject")
    table = stall_answer(run)
    if inject is None or table.empty:
        return "(no planted sync, or no time pass: no cross-rank cost to report)"
    what = f"{inject['count']}× {inject['kind']}() on rank {inject['rank']} ({inject['region']})"
    where = "host times of the emulated device" if run.is_emulated else "measured"
    lines = [f"What {what} costs the other ranks at the exchange, per step ({where}):"]
    others = table[table["rank"] != inject["rank"]]
    for r in others.itertuples():
        lines.append(
            f"  {r.backend:>5}, forward {r.forward_us:g} µs: rank {r.rank} waits "
            f"{r.diff_us:+.1f} µs per step [{LEVEL:.0%} CI {r.low_us:+.1f}, {r.high_us:+.1f}] "
            f"({r.without_us:.1f} -> {r.with_us:.1f} µs, {r.steps} paired steps)"
        )
    return "\n".join(lines)


def dp_summary(run: RunData) -> list[str]:
    """What `bench` prints for a DP run: per-rank syncs, exchange waits, the answer."""
    meta = run.meta["dp"]
    parts = [f"DP attention: {meta['ranks']} ranks; cells: {', '.join(meta['cells'])}"]
    syncs = syncs_by_rank_region(run)
    parts.append("\nSyncs per measured step, by rank (regions with syncs):")
    parts.append(syncs.to_string(float_format=lambda v: f"{v:.2f}") if len(syncs) else "(none)")
    wait = exchange_wait(run)
    if len(wait):
        g = wait.groupby(["label", "rank"])["us"]
        pct = pd.DataFrame({"p10": g.quantile(0.1), "p50": g.median(), "p90": g.quantile(0.9)})
        note = " (emulated device: host times only)" if run.is_emulated else ""
        parts.append(f"\nExchange wait per step ({EXCHANGE_REGION}, host), µs{note}:")
        parts.append(pct.to_string(float_format=lambda v: f"{v:.1f}"))
        parts.append("")
        parts.append(format_stall_answer(run))
    bad = run.outcomes[run.outcomes["status"] != "ok"]
    if len(bad):
        parts.append("\nCells that failed or did not run (outcomes.csv):")
        shown = [*CELL_KEYS, "pass", "status", "exception", "message"]
        parts.append(bad[shown].to_string(index=False))
    return parts
