"""Tidy summaries of a run's DataFrames: what the figures and notebooks plot.

Sync rates are per measured step of each kind (harness.results.rates): syncs of the decode
steps per decode step, of the prefill steps per prefill step, for each batch size apart — never
a mean over batch sizes or over steps of another kind. Step times are the time pass's raw
per-step samples (harness.results.samples); intervals are bootstrap intervals of the median
(harness.results.stats).
"""

from __future__ import annotations

import pandas as pd

from harness.results.deltas import variant_label
from harness.results.load import CELL_KEYS
from harness.results.rates import (
    KIND_ORDER,
    NOT_MEASURED,
    measured,
    measured_steps,
    step_kinds,
    syncs_per_kind_step,
)
from harness.results.samples import METRICS, STEP_REGION, UNMEASURED_TIME, step_times
from harness.results.samples import headline_metric as headline_metric
from harness.results.stats import median_interval
from harness.results.tables import AA_ARM
from harness.results.vocabulary import known_vocabulary

__all__ = [
    "KIND_ORDER",
    "METRICS",
    "NOT_MEASURED",
    "STEP_REGION",
    "UNMEASURED_TIME",
    "headline_metric",
    "measured",
]

NO_MODE = "no forward pass"  # rows outside any forward pass in runs that did not tag them


def label_parts(label: str) -> tuple[str, str]:
    """(variant, mirror) of a label `after` or `after (mirror=absent)` ("" when unlabelled)."""
    base = label.split(" ")[0]
    mirror = label.split("mirror=")[1].rstrip(")") if "mirror=" in label else ""
    return base, mirror


def order_variants(labels: list[str]) -> list[str]:
    """Labels in the worlds' order of variants (harness.results.vocabulary), then of mirror
    settings; labels of no known variant (a world's cases) after them, by name."""
    vocabulary = known_vocabulary()

    def key(label: str) -> tuple[int, int, str]:
        base, mirror = label_parts(label)
        mirror = mirror or (vocabulary.mirrors[0] if vocabulary.mirrors else "")
        return (
            vocabulary.variants.index(base) if base in vocabulary.variants else 99,
            vocabulary.mirrors.index(mirror) if mirror in vocabulary.mirrors else 9,
            label,
        )

    return sorted(set(labels), key=key)


def with_variant_label(df: pd.DataFrame) -> pd.DataFrame:
    """A `label` column: the variant (with its mirror setting when the rows mix them), or the
    cell's case in a world without variants; the A/A arm's cells `before A/A` (apart from the
    cell it replicates, in the variant's place)."""
    mirrors = set(df["mirror"].astype(str)) if len(df) else set()
    out = df.copy()
    arms = out["arm"] if "arm" in out else pd.Series("", index=out.index)
    out["label"] = [
        variant_label(str(v) + (" A/A" if a == AA_ARM else ""), str(m), mirrors) if v else str(c)
        for v, m, c, a in zip(out["variant"], out["mirror"], out["case"], arms)
    ]
    return out


def steps_per_cell(counts: pd.DataFrame) -> pd.DataFrame:
    """Number of measured steps of each cell (scenario, variant, mirror, batch size, rank)."""
    m = measured_steps(counts)
    if m.empty:
        return pd.DataFrame(columns=[*CELL_KEYS, "steps"])
    return m.groupby(CELL_KEYS)["step"].nunique().rename("steps").reset_index()


def syncs_by_region(counts: pd.DataFrame) -> pd.DataFrame:
    """Syncs per step of each kind for every (cell, forward mode, region)."""
    out = with_variant_label(syncs_per_kind_step(counts, [*CELL_KEYS, "forward_mode", "region"]))
    out["forward_mode"] = out["forward_mode"].replace("", NO_MODE)
    return out


def total_syncs_by_batch(counts: pd.DataFrame) -> pd.DataFrame:
    """Syncs per step of each kind of each cell, all regions together."""
    return with_variant_label(syncs_per_kind_step(counts, list(CELL_KEYS)))


def eager_batch_sizes(counts: pd.DataFrame) -> dict[str, list[int]]:
    """Per scenario, batch sizes whose decode/verify passes ran eagerly (no graph bucket fit)."""
    m = counts[
        counts["forward_mode"].isin(["DECODE", "TARGET_VERIFY"]) & (counts["path"] == "eager")
    ]
    return {s: sorted(int(b) for b in g.unique()) for s, g in m.groupby("scenario")["batch_size"]}


SITE = ["location", "function", "kind", "op"]


WAIT_COLUMNS = ["scenario", "label", "batch_size", "location", "kind", "us_per_step", "text"]


def wait_costs(costs: pd.DataFrame | None) -> pd.DataFrame:
    """The time pass's site costs (harness.results.waits.site_costs) of the scenario's own
    cells (not the A/A arm), by variant label: µs per step and its text `12.3 [10.1, 14.0]`."""
    if costs is None or costs.empty:
        return pd.DataFrame(columns=WAIT_COLUMNS)
    c = with_variant_label(costs[costs["arm"] == ""]).rename(columns={"site": "location"})
    c["text"] = [
        f"{e:.1f}" + (f" [{lo:.1f}, {hi:.1f}]" if lo == lo else "")
        for e, lo, hi in zip(c["us_per_step"], c["us_lo"], c["us_hi"])
    ]
    return c[WAIT_COLUMNS]


def blame_table(syncs: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """The sync blame: per (scenario, variant, batch size, step kind) and source line, syncs
    per step of that kind, with the regions and forward modes the line synced in.

    Columns: scenario, label, batch_size, step_kind, location, function, kind, op, regions,
    forward_modes, syncs, steps, per_step; sorted by scenario, variant, then per_step."""
    cols = [
        "scenario", "label", "batch_size", "step_kind", *SITE, "regions", "forward_modes",
        "syncs", "steps", "per_step",
    ]  # fmt: skip
    m = measured(syncs, counts)
    if m.empty:
        return pd.DataFrame(columns=cols)
    m = with_variant_label(m.merge(step_kinds(counts), on=[*CELL_KEYS, "step"], how="inner"))
    keys = ["scenario", "label", "batch_size", "step_kind", *SITE]
    g = m.groupby(keys)
    out = pd.DataFrame(
        {
            "syncs": g.size(),
            "regions": g["region"].agg(lambda r: ", ".join(sorted(set(r)))),
            "forward_modes": g["forward_mode"].agg(
                lambda r: ", ".join(sorted({x or NO_MODE for x in r}))
            ),
        }
    ).reset_index()
    steps = with_variant_label(step_kinds(counts))
    n = steps.groupby(["scenario", "label", "batch_size", "step_kind"]).size().rename("steps")
    out = out.join(n, on=["scenario", "label", "batch_size", "step_kind"])
    out["per_step"] = out["syncs"] / out["steps"]
    rank = {lab: i for i, lab in enumerate(order_variants(list(out["label"])))}
    out = out.sort_values(
        ["scenario", "label", "per_step"],
        ascending=[True, True, False],
        key=lambda s: s.map(rank) if s.name == "label" else s,
    )
    return out[cols].reset_index(drop=True)


def findings_per_cell(findings: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """Findings of each kind per cell, with the cell's measured steps (zero rows included)."""
    steps = steps_per_cell(counts)
    if "pass" in findings and (findings["pass"] == "count").any():
        # both passes report findings; per-step rates need the pass whose steps were counted
        findings = findings[findings["pass"] == "count"]
    # findings of warm-up or set-up steps are not per measured step
    findings = findings.merge(measured_steps(counts), on=[*CELL_KEYS, "step"], how="inner")
    kinds = sorted(set(findings["kind"].astype(str))) or ["stale_mirror"]
    grid = steps.merge(pd.DataFrame({"kind": kinds}), how="cross")
    n = findings.groupby([*CELL_KEYS, "kind"]).size().rename("findings").reset_index()
    out = grid.merge(n, on=[*CELL_KEYS, "kind"], how="left").fillna({"findings": 0})
    out["per_step"] = out["findings"] / out["steps"]
    return with_variant_label(out)


def failed_cells(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Cells that did not run to the end (any pass), with the failure and where it happened."""
    return outcomes[outcomes["status"].astype(str).str.lower() != "ok"]


def step_latency(latency: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, step, metric) with the whole step's time in microseconds."""
    return with_variant_label(step_times(latency))


def median_intervals(steps: pd.DataFrame) -> pd.DataFrame:
    """Median step time per (scenario, label, batch size, metric) with its 95% interval."""
    rows = []
    for (s, lab, b, metric), g in steps.groupby(["scenario", "label", "batch_size", "metric"]):
        ci = median_interval(g.set_index("step")["value_us"])
        rows.append((s, lab, b, metric, ci.estimate, ci.low, ci.high, ci.n))
    cols = ["scenario", "label", "batch_size", "metric", "p50_us", "lo_us", "hi_us", "n"]
    return pd.DataFrame(rows, columns=cols)


def latency_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """n, p50 with its 95% interval, p90, p99 and max per (scenario, variant, batch size,
    metric), variants in order."""
    keys = ["scenario", "label", "batch_size", "metric"]
    if steps.empty:
        return pd.DataFrame(columns=["p50_us", "lo_us", "hi_us", "n", "p90_us", "p99_us", "max_us"])
    q = steps.groupby(keys)["value_us"]
    out = pd.DataFrame(
        {
            "n": q.size(),
            "p90_us": q.quantile(0.9),
            "p99_us": q.quantile(0.99),
            "max_us": q.max(),
        }
    ).reset_index()
    ci = median_intervals(steps).drop(columns="n")
    out = ci.merge(out, on=keys)
    rank = {lab: i for i, lab in enumerate(order_variants(list(out["label"])))}
    out = out.sort_values(["scenario", "batch_size", "metric"]).sort_values(
        "label", key=lambda s: s.map(rank), kind="stable"
    )
    return out.set_index(keys)
