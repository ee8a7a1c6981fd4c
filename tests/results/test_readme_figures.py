"""The README's headline figure, recomputed from the committed run folders it cites: what
dropping the relay's sync saves in spec-v2 (`dropped` against `before`, the step's p50 at each
batch size measured) and the step it saves it from."""

from __future__ import annotations

import re
from pathlib import Path

from harness.results.deltas import against_reference
from harness.results.load import load_run
from harness.results.samples import headline_metric, step_times
from harness.serving.vocabulary import serving_vocabulary

REPO = Path(__file__).resolve().parents[2]
RUNS = [REPO / "results/h200/runs/specv2_mirror", REPO / "results/h200/runs/specv2_batch"]
HEADLINE = re.compile(r"saves (\d+)–(\d+) µs of\s+a (\d+)–(\d+) ms step")
DELTA = re.compile(r"bs=(\d+) dropped vs before: .*Δ p50 = −(\d+) µs")


def test_the_readme_headline_is_the_committed_runs() -> None:
    saved, steps_ms = [], []
    for folder in RUNS:
        (run_folder,) = folder.iterdir()
        run = load_run(run_folder)
        steps = step_times(run.latency)
        lines = against_reference(run.counts, steps, serving_vocabulary())
        saved += [
            int(m[2]) for line in lines if (m := DELTA.search(line.replace(" (mirror=auto)", "")))
        ]
        before = steps[(steps["variant"] == "before") & (steps["metric"] == headline_metric(steps))]
        steps_ms += list(before.groupby("batch_size")["value_us"].median() / 1e3)
    lo, hi, step_lo, step_hi = map(int, HEADLINE.search((REPO / "README.md").read_text()).groups())
    assert (min(saved), max(saved)) == (lo, hi)
    assert (int(min(steps_ms)), round(max(steps_ms))) == (step_lo, step_hi)
