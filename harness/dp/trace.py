"""A DP run's trace on one time axis per cell: the ranks' steps aligned at the exchange.

The ranks' clocks are their own (on different hosts they are unrelated), but every rank leaves
the step's all-gather when the last one arrives, at the same moment up to the collective's
release. So each step's exchange end is a common instant T_k: a rank's step k starts at T_k
minus where its exchange ended inside the step, and T_{k+1} is T_k plus the longest
"rest of step k, then step k+1 up to its exchange end" over the ranks (the rank that arrived
last set it; the time between two steps of a rank is taken as 0). Times come from the time
pass's region samples (``start_us``).
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from harness.dp.summary import EXCHANGE_REGION
from harness.results.load import CELL_KEYS, RunData
from harness.results.samples import STEP_REGION, UNMEASURED_TIME


def aligned_step_starts(run: RunData) -> dict[tuple, float]:
    """(*cell, step) -> start of the step in µs on its DP cell's common axis (for the DP
    world's rows of a run); empty without exchange samples with start times."""
    lat = run.latency
    lat = lat[
        (lat["metric"] == "host")
        & ~lat["path"].isin(UNMEASURED_TIME)
        & (lat["step"] >= 0)
        & lat["region"].isin([EXCHANGE_REGION, STEP_REGION])
    ]
    if lat.empty or lat["start_us"].isna().any():
        return {}
    # (label, cell, step) -> {"iteration": host µs, "exchange_end": µs into the step}
    steps: dict[str, dict[tuple, dict[int, dict[str, float]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for r in lat.to_dict("records"):
        cell = tuple(r[k] for k in CELL_KEYS)
        slot = steps[r["case"]][cell].setdefault(int(r["step"]), {})
        if r["region"] == EXCHANGE_REGION:
            slot["exchange_end"] = float(r["start_us"]) + float(r["value_us"])
        else:
            slot["iteration"] = float(r["value_us"])
    out: dict[tuple, float] = {}
    for ranks in steps.values():
        out.update(_align(ranks))
    return out


def _align(ranks: dict[tuple, dict[int, dict[str, float]]]) -> dict[tuple, float]:
    """Step starts of one DP cell's ranks (cell -> step -> times)."""
    common = sorted(set.intersection(*(set(s) for s in ranks.values())))
    common = [k for k in common if all(_complete(ranks[c][k]) for c in ranks)]
    out: dict[tuple, float] = {}
    t_exchange = prev = None
    for k in common:
        if t_exchange is None:
            t_exchange = max(ranks[c][k]["exchange_end"] for c in ranks)
        else:
            t_exchange += max(
                ranks[c][prev]["iteration"]
                - ranks[c][prev]["exchange_end"]
                + ranks[c][k]["exchange_end"]
                for c in ranks
            )
        for c in ranks:
            out[(*c, k)] = t_exchange - ranks[c][k]["exchange_end"]
        prev = k
    return out


def _complete(slot: dict[str, float]) -> bool:
    return "iteration" in slot and "exchange_end" in slot and not pd.isna(slot["iteration"])
