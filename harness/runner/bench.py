"""One benchmark run: a scenario's passes into a run folder, then the summary."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from harness import registry
from harness.errors import (
    CheckFailed,
    Interrupted,
    OperationalError,
    os_error_text,
    stop_reason,
    stop_signal,
)
from harness.results.meta import base_meta
from harness.results.precision import half_width, within_run
from harness.results.run_folder import RunFolder, new_run_id
from harness.results.tables import COLUMNS
from harness.results.vocabulary import ResultsPart
from harness.runner.auto_repeats import Repeats
from harness.runner.cells import WorldBuilder, build_scenario_world, cells
from harness.runner.count_pass import TABLES, PassRows
from harness.runner.device import DeviceHandle
from harness.runner.repeats import ProcessJob, Runner, in_fresh_process, pass_rows
from harness.scenario import SCENARIO_DIR, LoadedScenario
from harness.scenario.loader import display_path

PASSES = ("count", "time", "both")
ONE_PROCESS = Repeats()
STATUS = COLUMNS["outcomes"].index("status")


def failure_text(outcome: tuple) -> str:
    """'Exception: message at file:line' of a failed cell's outcome row."""
    o = dict(zip(COLUMNS["outcomes"], outcome))
    return f"{o['exception']}: {o['message']} at {o['location']}"


def chosen_pass(loaded: LoadedScenario, device_kind: str, asked: str | None) -> tuple[str, str]:
    """The passes to run and, when not the ones asked for or the default, why: a sweep's time
    pass on the emulated device (host times of many batch sizes) says nothing a GPU would, so
    there it runs the count pass only unless `--pass time|both` asks for more."""
    if asked is not None:
        return asked, ""
    if loaded.is_sweep and device_kind == "emu":
        why = (
            f"{display_path(loaded.path)} is a sweep: on the emulated device only its count pass "
            "runs (--pass time|both to time it anyway)"
        )
        return "count", why
    return "both", ""


def reproduce_argv(
    loaded: LoadedScenario,
    device_kind: str,
    which: str,
    repeats: Repeats = ONE_PROCESS,
    aa_every: bool = False,
) -> list[str]:
    """A command line that reruns this run (device resolved, so `auto` cannot change it)."""
    scenario = (
        loaded.name
        if loaded.path.resolve() == (SCENARIO_DIR / f"{loaded.name}.yaml").resolve()
        else display_path(loaded.path)
    )
    argv = ["bench", "--scenario", scenario, "--device", device_kind, "--pass", which]
    argv += repeats.argv() + (["--aa", "every"] if aa_every else [])
    for o in loaded.overrides:
        argv += ["--set", o]
    return argv


def run_meta(
    loaded: LoadedScenario,
    dh: DeviceHandle,
    which: str,
    run_id: str,
    repeats: Repeats = ONE_PROCESS,
    aa_every: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """meta.json of a run: the scenario as run, the command that reruns it, the machine."""
    sc = loaded.scenario
    scenario_meta = {
        "scenario": sc.name,
        "world": sc.world,
        "scenario_file": display_path(loaded.path),
        "scenario_sha256": loaded.file_sha256,
        "overrides": loaded.overrides,
        "config": loaded.effective(),
        "seed": sc.seed,
        "passes": ["count", "time"] if which == "both" else [which],
        "latency_note": "emulated device: host times only" if dh.kind == "emu" else None,
        "aa_arms": "every variant" if aa_every else "the reference",
        **extra,
    }
    argv = reproduce_argv(loaded, dh.kind, which, repeats, aa_every)
    return base_meta(argv=argv, device_kind=dh.kind, scenario=scenario_meta, run_id=run_id)


def step_frame(rows: PassRows) -> pd.DataFrame:
    """The whole steps' untraced latency rows gathered so far, as the reader gives them."""
    cols = COLUMNS["latency"]
    region, traced = cols.index("region"), cols.index("traced")
    kept = [r for r in rows.latency if r[region] == "iteration" and not r[traced]]
    lat = pd.DataFrame(kept, columns=list(cols))
    lat["value_us"] = lat["value"]  # the time pass writes µs
    return lat


def _half_widths(rows: PassRows, reference: str | None, repeats: Repeats) -> dict[str, float]:
    """The named Δs' half-widths over the processes so far (`--repeats auto`)."""
    if reference is None:
        return {}
    found = within_run(step_frame(rows), reference, repeats.deltas)
    return {name: half_width(ci) for name, ci in found.items()}


def run_bench(
    loaded: LoadedScenario,
    dh: DeviceHandle,
    which: str = "both",
    out_root: Path = Path("results/runs"),
    builder: WorldBuilder = build_scenario_world,
    show_progress: bool | None = None,
    repeats: int | Repeats = 1,
    spawn: Runner = in_fresh_process,
    aa_every: bool = False,
) -> RunFolder:
    """Run the passes and write the run folder; it is marked complete only at the end. With
    more than one process (`repeats`: a number, or auto) they run in fresh worker processes
    (`spawn`), the count pass in the first only."""
    sc = loaded.scenario
    policy = repeats if isinstance(repeats, Repeats) else Repeats(repeats)
    run_id = new_run_id()
    meta = run_meta(loaded, dh, which, run_id, policy, aa_every, cells=len(cells(sc)))
    folder = RunFolder.create(out_root, sc.name, run_id, meta)
    passes = ("count", "time") if which == "both" else (which,)
    part = registry.world(sc.world).part(ResultsPart)
    reference = part.vocabulary.reference if part is not None else None
    rows = PassRows()
    t0 = time.perf_counter()
    try:
        process, last_s, widths = 0, 0.0, {}

        def measure() -> dict[str, float]:
            widths.clear()
            widths.update(_half_widths(rows, reference, policy))
            return widths

        while (why := policy.stop(process, time.perf_counter() - t0, last_s, measure)) is None:
            job = ProcessJob(
                loaded,
                dh.kind,
                passes if process == 0 else tuple(p for p in passes if p == "time"),
                builder,
                show_progress,
                aa_every,
            )
            if not job.passes:
                break
            t1 = time.perf_counter()
            if policy.processes == 1:
                got = pass_rows(job, dh)
            else:
                got = spawn(job, process, policy.processes)
            rows.extend(got.with_process(process))
            last_s = time.perf_counter() - t1
            folder.meta.setdefault("process_s", []).append(round(last_s, 3))
            if process == 0 and "count" in passes:
                # written now: an interrupted time pass keeps them (the run stays incomplete)
                folder.write_table("counts", rows.counts)
                folder.write_table("syncs", rows.syncs)
                folder.write_json("stacks.json", rows.stacks)
                folder.write_meta()
            process += 1
        folder.meta["processes"] = process
        if policy.auto:
            folder.meta["repeats"] = policy.record(why, widths, process)
        folder.meta.update(rows.notes)
        for table in TABLES:
            if "count" not in passes or table not in ("counts", "syncs"):
                folder.write_table(table, getattr(rows, table))
        if "count" not in passes:
            folder.write_json("stacks.json", rows.stacks)
        failed = [o for o in rows.outcomes if o[STATUS] != "ok"]
        if failed and len(failed) == len(rows.outcomes):  # not a result: say why (exit 1)
            folder.meta["every_cell_failed"] = (
                f"every cell failed; the first: {failure_text(failed[0])}"
            )
        folder.finish(wall_s=round(time.perf_counter() - t0, 3), failed_cells=len(failed))
    except BaseException as exc:  # leave it marked incomplete with the reason, then say so
        told = stopped(folder, exc)
        if told is exc:
            raise
        raise told from None
    return folder


def stopped(folder: RunFolder, exc: BaseException) -> BaseException:
    """Mark the run folder stopped with the reason; the exception the command line turns into
    one line: Ctrl-C and SIGTERM (Interrupted, exit 130 / 143), a full disk or a file-size limit
    (OperationalError, exit 3), a dead worker process (CheckFailed, exit 1); anything else is
    passed on as it is."""
    if isinstance(exc, KeyboardInterrupt):
        signum = stop_signal(exc)
        folder.abandon(stop_reason(signum))
        return Interrupted(f"run folder left incomplete: {folder.path}", signum)
    if isinstance(exc, OSError):
        reason = os_error_text(exc)
        folder.abandon(reason)
        return OperationalError(f"{reason}; run folder left incomplete: {folder.path}")
    if isinstance(exc, CheckFailed):  # a worker process died (exit 1)
        folder.abandon(str(exc))
        return CheckFailed(f"{exc}; run folder left incomplete: {folder.path}")
    folder.abandon(f"{type(exc).__name__}: {exc}")
    return exc
