"""What `bench` prints for a run of the serving world: syncs per step of each kind by region,
time per scheduler iteration, each variant against the reference, failed cells, findings."""

from __future__ import annotations

from harness.results.load import RunData
from harness.results.summary import (
    failed_section,
    findings_section,
    latency_section,
    reference_section,
    syncs_section,
    waits_section,
)
from harness.serving.vocabulary import serving_vocabulary


def serving_summary(run: RunData) -> list[str]:
    return [
        *syncs_section(run),
        *latency_section(run),
        *reference_section(run, serving_vocabulary()),
        *waits_section(run),
        *failed_section(run),
        *findings_section(run),
    ]
