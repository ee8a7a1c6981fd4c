"""`compare` across runs: no interval from runs of one process; with repeats, Welch over both
runs' per-process medians and Holm across cells; a run without a count pass is named."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.results.compare import compare_runs
from harness.results.run_folder import RunFolder
from harness.results.tables import COLUMNS, FORMAT_VERSION, RESULT_FORMAT

VARIANTS = ("before", "after", "dropped")
STEPS = 30


def _run(
    root: Path, name: str, processes: int, shift: dict[str, float], seed: int, counted: bool = False
) -> Path:
    """A run folder of nonspec at bs=4: each process its own level (±40 µs), steps ±5 µs."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[dict]] = {t: [] for t in COLUMNS}
    for p in range(processes):
        level = 500 + rng.normal(0, 40)
        for v in VARIANTS:
            cell = dict(
                scenario="nonspec", case="", variant=v, mirror="auto", batch_size=4, rank=0, arm=""
            )
            for s in range(STEPS):
                where = dict(
                    cell, step=s, forward_mode="", path="graph", region="iteration", process=p
                )
                us = level + shift.get(v, 0.0) + rng.normal(0, 5)
                rows["latency"].append(
                    dict(
                        where,
                        device="emu",
                        metric="host",
                        value=us,
                        unit="us",
                        start_us=0,
                        round=s // 5,
                    )
                )
                if counted and p == 0:
                    rows["counts"].append(
                        dict(where, forward_mode="DECODE", region="step", syncs=int(v != "dropped"))
                    )
    meta = {
        "result_format": RESULT_FORMAT, "result_format_version": FORMAT_VERSION, "world": "serving",
        "scenario": "nonspec", "device_kind": "emu", "config": {"seed": 1},
    }  # fmt: skip
    folder = RunFolder(root / name, meta)
    folder.path.mkdir(parents=True)
    for t, rs in rows.items():
        folder.write_table(t, (tuple(r.get(c, "") for c in COLUMNS[t]) for r in rs))
    folder.write_json("stacks.json", {})
    folder.finish()
    return folder.path


def _cell_lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith("nonspec bs=4")]


def test_runs_of_one_process_get_a_delta_and_no_interval(tmp_path):
    a = _run(tmp_path, "a", 1, {}, 1, counted=True)
    b = _run(tmp_path, "b", 1, {"after": 300.0}, 2)
    text = compare_runs(a, b)
    assert "no interval to offer" in text and "--repeats" in text
    lines = _cell_lines(text)
    assert len(lines) == 3 and all(x.endswith("(no interval)") for x in lines)
    assert "95% CI" not in "\n".join(lines)
    # B has no count pass: said so, not "no decode steps in this cell"
    assert all("syncs per step n/a (B has no count pass)" in x for x in lines)


def test_repeats_use_both_runs_spread_and_holm_across_cells(tmp_path):
    same = compare_runs(_run(tmp_path, "a", 5, {}, 3), _run(tmp_path, "b", 5, {}, 4))
    assert "Welch" in same and "holds the drift between the runs" in same and "Holm" in same
    assert "\n0 of 3 cells differ (95%, Holm-corrected)\n" in same
    moved = compare_runs(
        _run(tmp_path, "c", 5, {}, 5), _run(tmp_path, "d", 5, {"dropped": 300.0}, 6)
    )
    lines = {x.split(":")[0].split()[-1]: x for x in _cell_lines(moved)}
    assert "[95% CI" in lines["dropped"] and not lines["dropped"].endswith("difference")
    assert lines["before"].endswith("no measurable difference")
