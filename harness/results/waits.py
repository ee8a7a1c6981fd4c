"""What each sync site costs: the time pass's synchronizing calls (waits.csv, one row per call of
a measured step) as µs per step at each site, beside its calls per step:
- the host's wait inside the call (the untraced steps);
- the device idle after the call, and the part of it the call cost the step (the traced steps,
  device tracer on: cost = min(wait, idle after) per call, harness.results.idle).

Per cell and process: a site's values summed over the steps, divided by the steps (a step
without a call at the site adds 0). Across processes: the mean and its t-interval (N − 1 df,
harness.results.replicas); one process gives the estimate without an interval.
"""

from __future__ import annotations

import pandas as pd

from harness.results.replicas import mean_interval
from harness.results.samples import CELL, step_times

SITE_KEYS = ["site", "kind"]
PARTS = {"us": "wait", "idle": "idle", "cost": "cost"}  # column prefix -> per-call value
COST_COLUMNS = [
    *CELL, *SITE_KEYS, "processes", "calls_per_step",
    *(f"{p}{s}" for p in PARTS for s in ("_per_step", "_lo", "_hi")),
]  # fmt: skip


def steps_per_process(latency: pd.DataFrame) -> pd.Series:
    """Measured steps per (cell, process)."""
    steps = step_times(latency)
    steps = steps[steps["metric"] == "host"]
    return steps.groupby([*CELL, "process"])["step"].nunique().rename("steps")


def _per_step(calls: pd.DataFrame, steps: pd.Series, values: list[str]) -> dict[tuple, dict]:
    """(cell, site, kind) -> {"calls": mean calls per step, value: (estimate, lo, hi), "n": ...}
    over the processes that ran the cell."""
    if calls.empty or steps.empty:
        return {}
    per = calls.groupby([*CELL, "process", *SITE_KEYS]).agg(
        calls=("wait", "size"), **{v: (v, "sum") for v in values}
    )
    per = per.join(steps, on=[*CELL, "process"], how="inner").reset_index()
    ran = steps.reset_index().groupby(CELL)["process"].nunique()
    out = {}
    for key, g in per.groupby([*CELL, *SITE_KEYS], sort=False):
        n = int(ran.get(key[: len(CELL)], len(g)))
        # a process that ran the cell but made no call at the site spent 0 there
        zeros = [0.0] * (n - len(g))
        entry: dict = {"n": n, "calls": float((g["calls"] / g["steps"]).sum() / n)}
        for v in values:
            ci, _p = mean_interval([*(g[v] / g["steps"]), *zeros])
            entry[v] = (ci.estimate, ci.low, ci.high)
        out[key] = entry
    return out


def call_parts(waits: pd.DataFrame) -> pd.DataFrame:
    """Per call: wait, idle after and cost, µs (idle and cost NaN where not traced)."""
    out = waits.assign(wait=waits["wait_ns"] / 1e3)
    idle = out["idle_after_us"] if "idle_after_us" in out else float("nan")
    out["idle"] = idle
    out["cost"] = out[["wait", "idle"]].min(axis=1, skipna=False)
    return out


def site_costs(
    waits: pd.DataFrame,
    latency: pd.DataFrame,
    traced_waits: pd.DataFrame | None = None,
    traced_latency: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per (cell, site, kind), ranked by µs per step waiting within each cell; the
    idle and cost columns come from the traced steps (NaN without them)."""
    plain = _per_step(call_parts(waits), steps_per_process(latency), ["wait"])
    traced = {}
    if traced_waits is not None and traced_latency is not None and not traced_waits.empty:
        traced = _per_step(
            call_parts(traced_waits), steps_per_process(traced_latency), ["idle", "cost"]
        )
    if not plain and not traced:
        return pd.DataFrame(columns=COST_COLUMNS)
    nan = (float("nan"),) * 3
    rows = []
    for key in dict.fromkeys([*plain, *traced]):
        p, t = plain.get(key, {}), traced.get(key, {})
        calls = p.get("calls", t.get("calls", float("nan")))
        n = p.get("n", t.get("n", 0))
        rows.append((*key, n, calls, *p.get("wait", nan), *t.get("idle", nan), *t.get("cost", nan)))
    out = pd.DataFrame(rows, columns=COST_COLUMNS)
    return out.sort_values([*CELL, "us_per_step"], ascending=[True] * len(CELL) + [False])


def step_breakdown(
    traced_waits: pd.DataFrame, traced_latency: pd.DataFrame, top: int = 4
) -> pd.DataFrame:
    """Where a traced step's device time goes, µs per step of each cell (the mean over its
    traced steps of every process): `kernels` (device busy), the idle each of the `top` sync
    sites that cost most caused (per call min(wait, idle after)), the other sites' together,
    and the rest of the idle (`other idle`); the parts add up to the step's device span."""
    steps = step_times(traced_latency)
    cols = [*CELL, "part", "us_per_step"]
    if steps.empty:
        return pd.DataFrame(columns=cols)
    n = steps[steps["metric"] == "host"].groupby(CELL)["step"].size()
    totals = steps.groupby([*CELL, "metric"])["value_us"].sum()
    calls = call_parts(traced_waits)
    cost = calls.groupby([*CELL, "site"])["cost"].sum() if len(calls) else pd.Series(dtype=float)
    rows = []
    for cell, count in n.items():
        cell = cell if isinstance(cell, tuple) else (cell,)
        busy = totals.get((*cell, "busy"), float("nan")) / count
        span = totals.get((*cell, "span"), float("nan")) / count
        mine = cost[[i for i in cost.index if tuple(i[:-1]) == cell]] / count
        mine = mine.sort_values(ascending=False)
        parts = [("kernels", busy)]
        parts += [(f"idle caused: {i[-1]}", v) for i, v in mine.head(top).items()]
        if len(mine) > top:
            parts.append(("idle caused: other sites", float(mine.iloc[top:].sum())))
        parts.append(("other idle", span - busy - float(mine.sum())))
        rows += [(*cell, part, value) for part, value in parts]
    return pd.DataFrame(rows, columns=cols)
