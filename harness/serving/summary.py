"""What `bench` prints for a run of the serving world: syncs per step of each kind by region,
time per scheduler iteration, each variant against the reference, failed cells, findings."""

from __future__ import annotations

from harness.results.false_positives import false_positive_section
from harness.results.load import RunData
from harness.results.predict import prediction_section
from harness.results.summary import (
    failed_section,
    findings_section,
    latency_section,
    reference_section,
    repeats_section,
    syncs_section,
    trace_section,
    waits_section,
)
from harness.serving.vocabulary import serving_vocabulary


def serving_summary(run: RunData) -> list[str]:
    return [
        *syncs_section(run),
        *latency_section(run),
        *reference_section(run, serving_vocabulary()),
        *false_positive_section(run.latency),
        *repeats_section(run),
        *waits_section(run),
        *trace_section(run),
        *prediction_section(run, serving_vocabulary()),
        *failed_section(run),
        *findings_section(run),
    ]
