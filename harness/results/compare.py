"""Two run folders side by side: each cell of B against the same cell of A (Δ syncs per decode
and per prefill step, Δ p50 step time), and the rows whose syncs per step differ.

Two runs were made at different times, in different processes: what separates them is the
spread between processes and the drift of the machine, which no number of steps inside one
process measures. So a Δ of step time gets an interval only when both runs have several worker
processes (`--repeats N`): Welch's t-interval over both runs' per-process medians (unpaired:
the processes of two runs do not pair), with the cells' verdicts corrected for how many are
compared (Holm). Two runs of one process each get the Δ and no interval. The two sides of one
`bench --against` run are different: their processes ran in interleaved pairs, so they pair
(the t-interval over per-pair differences of medians), and the machine's drift cancels.

Cells match by (scenario, case, variant, mirror, batch size, rank, arm) and rows further by
(step kind, forward mode, path, region); what one run lacks is shown as missing, never as 0.
When the runs' configurations differ (meta.json's `config`: the scenario after its overrides,
seed included) compare says which keys differ."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import InputError, shown
from harness.results.deltas import (
    CellRates,
    cell_name,
    cell_rates,
    digits_for,
    format_time_delta,
    signed,
    sync_deltas,
)
from harness.results.load import RunData, load_run
from harness.results.rates import CELL, syncs_per_kind_step
from harness.results.replicas import (
    MIN_PROCESSES,
    holm_rejects,
    paired_process_difference,
    welch_interval,
)
from harness.results.samples import headline_metric, processes, step_times
from harness.results.stats import Interval

ROW_KEYS = ["step_kind", "forward_mode", "path", "region"]
MISSING = "missing"


def _scenarios(run: RunData) -> list[str]:
    return sorted(set(run.counts["scenario"]) | set(run.latency["scenario"]))


def check_same_scenario(a: RunData, b: RunData, other_scenario: bool) -> None:
    """Runs of different scenarios share no cell: refused unless asked for."""
    sa, sb = _scenarios(a), _scenarios(b)
    if sa != sb and not other_scenario:
        raise InputError(
            f"runs of different scenarios (A: {', '.join(sa) or 'none'}; B: "
            f"{', '.join(sb) or 'none'}); pass --other-scenario to match their cells anyway",
            file=str(b.path),
            key="scenario",
        )


def _unscoped(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of another scenario, matched as if of one (--other-scenario)."""
    return df.assign(scenario="*") if len(df) else df


def sync_diff(a: pd.DataFrame, b: pd.DataFrame, show_all: bool = False) -> str:
    """Syncs per step of each kind, A and B, per cell and row; rows that differ (all rows with
    show_all). A row one run lacks reads `missing`."""
    keys = [*CELL, *ROW_KEYS]
    pa = syncs_per_kind_step(a, [*CELL, *ROW_KEYS[1:]]).set_index(keys)["per_step"]
    pb = syncs_per_kind_step(b, [*CELL, *ROW_KEYS[1:]]).set_index(keys)["per_step"]
    df = pd.concat([pa.rename("A"), pb.rename("B")], axis=1)
    if df.empty:
        return "(no measured steps in either run)"
    if not show_all:
        df = df[(df["A"] != df["B"]) | df["A"].isna() | df["B"].isna()]
    if df.empty:
        return "(no difference)"
    out = pd.DataFrame(index=df.index)
    for side in ("A", "B"):
        out[side] = [MISSING if v != v else f"{v:.2f}" for v in df[side]]
    out["B − A"] = [
        MISSING if (x != x or y != y) else signed(y - x, 2) for x, y in zip(df["A"], df["B"])
    ]
    return out.sort_index().to_string()


def _flat(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested configuration as dotted keys -> values."""
    if not isinstance(config, dict):
        return {prefix.rstrip("."): config}
    out: dict[str, Any] = {}
    for key, value in config.items():
        out.update(_flat(value, f"{prefix}{key}."))
    return out


def config_differences(a: dict, b: dict) -> list[str]:
    """`key: A x, B y` for every configuration key whose value differs between two runs."""
    fa, fb = _flat(a.get("config") or {}), _flat(b.get("config") or {})
    absent = "(absent)"
    return [
        f"{k}: A {shown(fa.get(k, absent))}, B {shown(fb.get(k, absent))}"
        for k in sorted(set(fa) | set(fb))
        if fa.get(k, absent) != fb.get(k, absent)
    ]


@dataclass(frozen=True)
class TimeDeltas:
    """Each cell's Δ of step time between two runs, and whether it differs."""

    metric: str
    processes: tuple[int, int]  # of A and of B
    rates: tuple[dict[tuple, CellRates], dict[tuple, CellRates]]
    intervals: dict[tuple, Interval]  # timed cells of both runs
    differs: dict[tuple, bool]  # empty without an interval (a run of one process)
    paired: bool = False  # the two sides of one `bench --against` run: paired by pair

    @property
    def spread(self) -> bool:
        return min(self.processes) >= MIN_PROCESSES


def time_deltas(a: RunData, b: RunData) -> TimeDeltas:
    """B − A of each cell's step time: the mean of per-process medians, with Welch's interval
    when both runs have several processes, and the verdicts corrected by Holm's method."""
    steps_a, steps_b = step_times(a.latency), step_times(b.latency)
    metric = headline_metric(pd.concat([steps_a, steps_b]))
    ra, rb = cell_rates(a.counts, steps_a, metric), cell_rates(b.counts, steps_b, metric)
    timed = [c for c in ra if c in rb and not (ra[c].times.empty or rb[c].times.empty)]
    paired = interleaved(a.meta, b.meta)
    if paired:
        tests = {c: paired_process_difference(ra[c].medians, rb[c].medians) for c in timed}
    else:
        tests = {
            c: welch_interval(ra[c].medians.to_numpy(), rb[c].medians.to_numpy()) for c in timed
        }
    n = (processes(steps_a), processes(steps_b))
    differs = {}
    if min(n) >= MIN_PROCESSES:
        differs = dict(zip(timed, holm_rejects([tests[c][1] for c in timed])))
    intervals = {c: t[0] for c, t in tests.items()}
    return TimeDeltas(metric, n, (ra, rb), intervals, differs, paired)


def interleaved(a: dict, b: dict) -> bool:
    """Whether two runs are the two sides of one `bench --against` run."""
    run = a.get("against_run")
    return bool(run) and run == b.get("against_run") and a.get("side") != b.get("side")


def cell_lines(a: RunData, b: RunData) -> list[str]:
    """One line per cell of either run: B against A, then how many cells differ."""
    d = time_deltas(a, b)
    ra, rb = d.rates
    mirrors = {c[CELL.index("mirror")] for c in (*ra, *rb)}
    na, nb = d.processes
    if d.spread and d.paired:
        head = (
            f"(Δ = B − A; {d.metric} time per step, the mean of per-pair differences of "
            f"medians; 95% CI over the {na} interleaved pairs of one --against run, paired: the "
            "machine's drift cancels; a verdict of difference is corrected for the "
            f"{len(d.intervals)} cells compared, Holm)"
        )
    elif d.spread:
        head = (
            f"(Δ = B − A; {d.metric} time per step, the mean of per-process medians; 95% CI "
            f"between processes of both runs, Welch, unpaired: A {na}, B {nb} processes; the "
            "interval holds the drift between the runs; a verdict of difference is corrected "
            f"for the {len(d.intervals)} cells compared, Holm)"
        )
    else:
        head = (
            f"(Δ = B − A; {d.metric} time per step, median; no interval to offer: with "
            f"A {na}, B {nb} processes the spread from run to run is unknown; rerun both with "
            "--repeats 5 for one)"
        )
    lines = [head]
    for cell in dict.fromkeys([*ra, *rb]):
        name = cell_name(cell, mirrors)
        if cell not in ra or cell not in rb:
            lines.append(f"{name}: {MISSING} in {'A' if cell not in ra else 'B'}")
            continue
        syncs = sync_deltas(ra[cell], rb[cell], ("A", "B"))
        if cell not in d.intervals:
            lines.append(f"{name}: {syncs}; no time pass in {'A' if ra[cell].times.empty else 'B'}")
        elif d.spread:
            lines.append(
                f"{name}: {syncs}; {format_time_delta(d.intervals[cell], differs=d.differs[cell])}"
            )
        else:
            e = float(rb[cell].times.median() - ra[cell].times.median())
            lines.append(f"{name}: {syncs}; Δ p50 = {signed(e, digits_for(e))} µs (no interval)")
    if d.spread:
        lines.append(
            f"{sum(d.differs.values())} of {len(d.differs)} cells differ (95%, Holm-corrected)"
        )
    return lines


def compare_runs(a: Path, b: Path, show_all: bool = False, other_scenario: bool = False) -> str:
    run_a, run_b = load_run(a), load_run(b)
    check_same_scenario(run_a, run_b, other_scenario)
    if other_scenario:
        for run in (run_a, run_b):
            for name in ("counts", "latency"):
                setattr(run, name, _unscoped(getattr(run, name)))
    parts = [f"A = {a}\nB = {b}"]
    if run_a.meta.get("device_kind") != run_b.meta.get("device_kind"):
        parts.append(
            f"note: devices differ (A: {run_a.device}, B: {run_b.device}); times do not compare"
        )
    differ = config_differences(run_a.meta, run_b.meta)
    if differ:
        parts.append(
            "note: the configurations differ, so A and B did not run the same work: "
            + "; ".join(differ)
        )
    elif run_a.meta.get("scenario_sha256") != run_b.meta.get("scenario_sha256"):
        parts.append("note: the scenario files differ, but not the configurations they gave")
    parts.append(
        "\nEach cell, B against A (runs made at different times: a time difference also holds "
        "what changed on the machine between them; cells of one run are interleaved):"
    )
    parts.extend(cell_lines(run_a, run_b))
    parts.append("\nSyncs per measured step of each kind (A, B, B − A):")
    parts.append(sync_diff(run_a.counts, run_b.counts, show_all))
    return "\n".join(parts)
