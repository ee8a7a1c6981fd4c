"""What `bench` prints for a lifecycle run: the serving summary's syncs per step, then each
cell's sync sites apart: the steady ones per step of their kind, the occasional ones per 1,000
measured steps."""

from __future__ import annotations

import pandas as pd

from harness.lifecycle.rates import site_rates
from harness.results.load import RunData
from harness.results.summary import (
    failed_section,
    findings_section,
    latency_section,
    syncs_section,
)

SHOWN = ["variant", "mirror", "batch_size", "footing", "step_kind", "region", "location", "op"]


def rates_table(rates: pd.DataFrame) -> str:
    if rates.empty:
        return "(no syncs in measured steps)"
    rates = rates.sort_values(["variant", "mirror", "batch_size", "footing", "step_kind"])
    cols = [*SHOWN, "kind", "syncs", "steps", "per_step", "per_1000_steps"]
    shown = rates[cols].astype({"syncs": int, "steps": int})
    shown = shown.rename(columns={"batch_size": "max_bs"})
    return shown.to_string(index=False, float_format=lambda v: f"{v:.2f}", na_rep="-")


def lifecycle_summary(run: RunData) -> list[str]:
    head = (
        "\nSync sites, steady and occasional: steady sites sync in every measured step of "
        "their kind (per_step: syncs per such step); occasional ones do not (per_1000_steps: "
        "syncs per 1,000 measured steps of the cell):"
    )
    return [
        *syncs_section(run),
        head,
        rates_table(site_rates(run.counts, run.syncs)),
        *latency_section(run),
        *failed_section(run),
        *findings_section(run),
    ]
