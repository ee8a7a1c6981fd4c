"""`bench --against REF`: did a change slow the step? The same cells, for this checkout (A) and
for another tree of the harness (B: a folder, or a git revision checked out as a detached
worktree for the run), in interleaved worker processes, so that the Δ between them carries no
drift of the machine.

Each worker is `python -m harness bench --pass time` (the first pair `--pass` as asked) run in
its tree, one process each, into a scratch folder: the command every commit has, so B may be
older than this feature. The pairs run A B, B A, A B, … (each pair in the other order from the
last: a steady drift hits both sides alike), both with the scenario file of A. The rows of A's
workers and of B's are gathered into two run folders, `<run-id>` and `<run-id>-against`, each
worker's rows with its pair as `process`; `compare` pairs them by pair (harness.results.compare).
No traced rounds run (HARNESS_DEVICE_TRACE=0 in both trees' workers): the two sides must run
under the same instruments.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import CheckFailed, InputError
from harness.results.load import RunData, load_run
from harness.results.meta import REPO_ROOT, git_info
from harness.results.run_folder import RunFolder, new_run_id
from harness.results.tables import COLUMNS, FORMAT_VERSION, RESULT_FORMAT
from harness.runner.auto_repeats import Repeats
from harness.runner.count_pass import TABLES, PassRows
from harness.runner.device_trace import ENV as TRACE_ENV
from harness.scenario import LoadedScenario

SIDES = ("A", "B")
AGAINST_SUFFIX = "-against"


@dataclass(frozen=True)
class Tree:
    """A tree of the harness to run a side in."""

    root: Path
    ref: str  # as the user named it ("" for this checkout)
    commit: str | None  # its git commit, where git knows it


def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@contextmanager
def tree_of(ref: str, scratch: Path) -> Iterator[Tree]:
    """REF as a tree: a folder holding the harness, or a git revision of this checkout's
    repository checked out (detached) under `scratch` for the run."""
    path = Path(ref)
    if path.is_dir():
        if not (path / "harness" / "__main__.py").is_file():
            raise InputError(
                "not a tree of this harness (no harness/__main__.py)", file=ref, key="--against"
            )
        # a copy inside another checkout must not take that checkout's commit for its own
        own = _git(path, "rev-parse", "--show-toplevel") == str(path.resolve())
        yield Tree(path.resolve(), ref, _git(path, "rev-parse", "HEAD") if own else None)
        return
    sha = _git(REPO_ROOT, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if sha is None:
        raise InputError("neither a folder nor a git revision of this checkout", key="--against")
    where = scratch / f"tree-{sha[:12]}"
    if _git(REPO_ROOT, "worktree", "add", "--detach", str(where), sha) is None:
        raise InputError(f"git could not check out {sha[:12]} under {scratch}", key="--against")
    try:
        yield Tree(where, ref, sha)
    finally:
        _git(REPO_ROOT, "worktree", "remove", "--force", str(where))


def order(pair: int) -> tuple[str, str]:
    """The sides of a pair in the order they run: A B, then B A, ..."""
    return SIDES if pair % 2 == 0 else SIDES[::-1]


@dataclass(frozen=True)
class SideJob:
    """One worker: a tree, the bench arguments every worker shares, its passes."""

    tree: Tree
    argv: tuple[str, ...]  # after `bench`, without --pass and --out
    which: str

    def command(self, out: Path) -> list[str]:
        return [sys.executable, "-m", "harness", "bench", *self.argv, "--pass", self.which,
                "--out", str(out), "--no-progress"]  # fmt: skip

    def environment(self) -> dict[str, str]:
        src = [str(self.tree.root), str(self.tree.root / "syncledger" / "src")]
        rest = os.environ.get("PYTHONPATH")
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([*src, *([rest] if rest else [])]),
            TRACE_ENV: "0",
        }


def run_side(job: SideJob, out: Path) -> RunData:
    """One worker process in its tree; its run folder, read by this harness's reader (which
    upgrades an older result format)."""
    done = subprocess.run(
        job.command(out), cwd=job.tree.root, env=job.environment(), capture_output=True, text=True
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CheckFailed(f"the worker in {job.tree.root} exited {done.returncode}: {tail}")
    (folder,) = [p.parent for p in out.glob("*/*/meta.json")]
    return load_run(folder)


SideRunner = Callable[[SideJob, Path], RunData]  # how a worker is run (a test's own)


def rows_of_run(run: RunData, process: int) -> PassRows:
    """A worker's run folder as rows again (traced rows, if any, back in their tables), each
    with `process`."""
    frames = {t: getattr(run, t) for t in TABLES}
    frames["latency"] = pd.concat([run.latency, run.traced_latency])
    frames["waits"] = pd.concat([run.waits, run.traced_waits])
    rows = PassRows(stacks=dict(run.stacks))
    for t, df in frames.items():
        cols = list(COLUMNS[t])
        kept = df.reindex(columns=cols).assign(process=process).astype(object)
        kept = kept.where(kept.notna(), None)
        getattr(rows, t).extend(tuple(r) for r in kept.itertuples(index=False))
    return rows


@dataclass
class Sides:
    """What the pairs gave so far: each side's rows and worker metas, pair by pair."""

    rows: dict[str, PassRows]
    metas: dict[str, list[dict[str, Any]]]
    seconds: list[float]


def run_pairs(
    jobs: dict[str, SideJob],
    later: dict[str, SideJob],
    repeats: Repeats,
    half_widths: Callable[[Sides], dict[str, float]],
    run_side: SideRunner = run_side,
) -> tuple[Sides, str]:
    """Pairs until `repeats` says stop; the sides and why it stopped."""
    sides = Sides({s: PassRows() for s in SIDES}, {s: [] for s in SIDES}, [])
    t0 = time.perf_counter()
    pair, last_s = 0, 0.0
    while (
        why := repeats.stop(pair, time.perf_counter() - t0, last_s, lambda: half_widths(sides))
    ) is None:
        t1 = time.perf_counter()
        for side in order(pair):
            job = jobs[side] if pair == 0 else later[side]
            with tempfile.TemporaryDirectory(prefix=f"against-{side}{pair}-") as scratch:
                run = run_side(job, Path(scratch))
            sides.rows[side].extend(rows_of_run(run, pair))
            sides.metas[side].append(run.meta)
        last_s = time.perf_counter() - t1
        sides.seconds.append(round(last_s, 3))
        pair += 1
    return sides, why


def write_side(
    out_root: Path, scenario: str, run_id: str, meta: dict[str, Any], rows: PassRows
) -> RunFolder:
    folder = RunFolder.create(out_root, scenario, run_id, meta)
    for table in TABLES:
        folder.write_table(table, getattr(rows, table))
    folder.write_json("stacks.json", rows.stacks)
    folder.finish()
    return folder


def side_meta(base: dict[str, Any], run_id: str, tree: Tree, sides: Sides, **extra: Any) -> dict:
    """meta.json of one side: its first worker's (its tree's commit and versions), named as
    a run of `processes` pairs of the against run."""
    meta = {k: v for k, v in base.items() if k not in ("files", "sha256", "rows", "status")}
    meta.update(
        run_id=run_id,
        result_format=RESULT_FORMAT,  # written by this harness, whatever wrote the worker's
        result_format_version=FORMAT_VERSION,
        status="incomplete",
        complete=False,
        processes=len(sides.seconds),
        pair_s=sides.seconds,
        tree={"root": str(tree.root), "ref": tree.ref, "commit": tree.commit},
        **extra,
    )
    if meta.get("git_commit") != tree.commit:  # the worker's git may have seen a checkout around it
        meta.update(git_commit=tree.commit, git_dirty=None)
    return meta


def against(
    loaded: LoadedScenario,
    ref: str,
    argv: list[str],
    which: str,
    out_root: Path,
    repeats: Repeats,
    half_widths: Callable[[Sides], dict[str, float]],
    command: str,
    run_side: SideRunner = run_side,
) -> tuple[RunFolder, RunFolder, str]:
    """The against run: both run folders (A: this checkout, B: REF) and why it stopped."""
    this = Tree(REPO_ROOT, "", git_info()["git_commit"])
    with (
        tempfile.TemporaryDirectory(prefix="against-trees-") as scratch,
        tree_of(ref, Path(scratch)) as other,
    ):
        trees = {"A": this, "B": other}
        jobs = {s: SideJob(t, tuple(argv), which) for s, t in trees.items()}
        later = {s: SideJob(t, tuple(argv), "time") for s, t in trees.items()}
        sides, why = run_pairs(jobs, later, repeats, half_widths, run_side)
    run_id = new_run_id()
    ids = {"A": run_id, "B": f"{run_id}{AGAINST_SUFFIX}"}
    common = {"command": command, "interleaved": "A B, B A, …", "against_run": ids}
    if repeats.auto:
        common["repeats"] = repeats.record(why, half_widths(sides), len(sides.seconds))
    folders = []
    for side in SIDES:
        meta = side_meta(sides.metas[side][0], ids[side], trees[side], sides, side=side, **common)
        name = loaded.scenario.name
        folders.append(write_side(out_root, name, ids[side], meta, sides.rows[side]))
    return folders[0], folders[1], why
