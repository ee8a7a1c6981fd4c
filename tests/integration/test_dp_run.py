"""DP attention on 2 real torch.distributed ranks (emulated device, gloo): what the ranks decide
together, what each rank's exchange costs in syncs, and a rank that dies.

One run serves most tests: rank 0 decodes 4 requests and prefills every 3rd step, rank 1 has
no requests; gloo and the NCCL variant; without and with one .item() planted on rank 0.
"""

from __future__ import annotations

import json
import multiprocessing.process
import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from harness.dp.job import RankJob
from harness.dp.launch import launch_local
from harness.dp.plugin import figures
from harness.dp.summary import EXCHANGE_REGION
from harness.errors import CheckFailed
from harness.report import load_run
from harness.report.trace import build_trace
from harness.results.run_folder import INCOMPLETE_MARKER, is_complete, new_run_id
from harness.results.summary import format_summary
from harness.scenario import load_scenario
from tests.support.dp_fakes import DYING_RANK, EXIT_CODE, dying_builder, dying_builder_peer_busy
from tests.support.overrides import overridden

SETTINGS = [
    "steps.warmup=1",
    "steps.count=6",
    "steps.time_emu=4",
    "dp.forward_us=[0]",
    "dp.timeout_s=30",
    "dp.streams=[{batch_size: 4, prefill_every: 3}, {idle: true}]",
]
# the NCCL variant's exchange per step: the two records built on the device, the inactive-rank
# mask, the token counts' .cpu(), three .item(), two-batch overlap's .cpu()
NCCL_EXCHANGE = {("h2d_blocking", "tensor"): 2, ("d2h_read", "setitem"): 1,
                 ("d2h_read", "cpu"): 2, ("d2h_read", "item"): 3}  # fmt: skip


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> tuple[Path, list[str]]:
    """The run folder, and what the run left in the temporary directory."""
    out = tmp_path_factory.mktemp("dp")
    temp = tmp_path_factory.mktemp("tempdir")
    argv = ["bench", "--scenario", "dp_attention", "--device", "emu", "--out", str(out)]
    for s in SETTINGS:
        argv += ["--set", s]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", str(temp))
        assert main(argv) == 0
    (folder,) = (out / "dp_attention").iterdir()
    # multiprocessing's own folder (the fork server's socket) goes when this process exits
    return folder, sorted(p.name for p in temp.iterdir() if not p.name.startswith("pymp-"))


@pytest.fixture(scope="module")
def run(bench) -> Path:
    return bench[0]


def test_a_run_leaves_nothing_in_the_temporary_directory(bench):
    assert bench[1] == []


def _table(folder: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(folder / f"{name}.csv", keep_default_na=False)


def _measured(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["path"].isin(["graph", "eager"]) & (df["step"] >= 1)]


@pytest.mark.slow
def test_run_is_complete_with_every_rank(run):
    assert is_complete(run)
    meta = json.loads((run / "meta.json").read_text())
    assert len(meta["dp"]["cells"]) == 4  # gloo / nccl x without / with the planted sync
    assert [r["rank"] for r in meta["dp"]["ranks_seen"]] == [0, 1]
    for name in ("counts", "syncs", "latency", "outcomes"):
        assert set(_table(run, name)["rank"]) == {0, 1}, name
    outcomes = _table(run, "outcomes")
    assert len(outcomes) == 4 * 2 * 2 and set(outcomes["status"]) == {"ok"}


def test_one_prefilling_rank_makes_every_rank_eager_and_an_idle_rank_runs_idle(run):
    counts = _measured(_table(run, "counts"))
    modes = defaultdict(set)  # (cell, step, rank) -> {(forward_mode, path)}
    for r in counts.itertuples():
        modes[(r.case, r.step, r.rank)].add((r.forward_mode, r.path))
    steps = sorted({(cell, step) for cell, step, _rank in modes})
    prefill_steps = 0
    for cell, step in steps:
        rank0, rank1 = modes[(cell, step, 0)], modes[(cell, step, 1)]
        if rank0 == {("EXTEND", "eager")}:  # rank 0 prefills: nobody replays a graph
            prefill_steps += 1
            assert rank1 == {("IDLE", "eager")}, (cell, step)
        else:  # the idle rank replays rank 0's bucket: graphs need the max across ranks
            assert rank0 == {("DECODE", "graph")}, (cell, step)
            assert rank1 == {("IDLE", "graph")}, (cell, step)
    assert prefill_steps == 2 * 4  # steps 2 and 5 of each cell


def test_exchange_syncs_per_rank(run):
    counts = _measured(_table(run, "counts"))
    ex = counts[counts["region"] == EXCHANGE_REGION]
    per_step = ex.groupby(["case", "rank", "step"])["syncs"].sum()
    for (cell, rank, step), n in per_step.items():
        want = 0 if cell.startswith("gloo/") else sum(NCCL_EXCHANGE.values())
        assert n == want, (cell, rank, step)
    assert len(per_step) == 4 * 2 * 6  # every cell, rank and measured step has the region
    syncs = _measured(_table(run, "syncs"))
    nccl = syncs[(syncs["region"] == EXCHANGE_REGION) & syncs["case"].str.startswith("nccl/")]
    for (cell, rank, step), g in nccl.groupby(["case", "rank", "step"]):
        assert Counter(zip(g["kind"], g["op"])) == NCCL_EXCHANGE, (cell, rank, step)
        assert set(g["location"].str.rsplit(":", n=1).str[0]) == {"harness/dp/exchange.py"}


def test_planted_sync_is_counted_on_its_rank_only(run):
    syncs = _measured(_table(run, "syncs"))
    planted = syncs[syncs["location"].str.startswith("harness/dp/inject.py")]
    assert set(planted["case"].str.rsplit("/", n=1).str[1]) == {"inject"}
    assert set(planted["rank"]) == {0}
    assert set(zip(planted["kind"], planted["op"], planted["region"])) == {
        ("d2h_read", "item", "step/scheduler/prepare")
    }
    assert len(planted) == 2 * 6  # one per measured step of each injected cell


def test_time_pass_has_each_ranks_exchange_wait(run):
    lat = _table(run, "latency")
    ex = lat[(lat["region"] == EXCHANGE_REGION) & (lat["metric"] == "host")]
    ex = ex[ex["path"].isin(["graph", "eager"])]
    assert set(ex.groupby(["case", "rank"]).size()) == {4}  # time_emu steps, each rank
    assert (ex["value"] > 0).all() and set(ex["unit"]) == {"us"}


def test_bench_prints_the_cross_rank_cost(run):
    text = format_summary(run)
    assert "What 1× item() on rank 0 (step/scheduler/prepare) costs the other ranks" in text
    for backend in ("gloo", "nccl"):
        assert f"{backend}, forward 0 µs: rank 1 waits" in text
    assert "95% CI" in text


def test_dp_figures_and_trace(run):
    data = load_run(run)
    for name in ("dp_syncs_per_rank", "dp_exchange_wait"):
        fig = figures()[name].draw(data)
        texts = " ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))
        assert "rank 0" in texts and "rank 1" in texts, name
    trace = build_trace(data)
    assert trace["otherData"]["step_layout"].startswith("as the run's world places them")
    names = {
        e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"
    }
    assert len(names) == 4 * 2 and all(" · rank " in n for n in names.values())
    ends = defaultdict(list)  # (cell, step) -> exchange end of each rank
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e["name"] == EXCHANGE_REGION:
            cell = " · ".join(names[e["pid"]].split(" · ")[:2])  # scenario · DP cell
            ends[(cell, e["args"]["step"])].append(e["ts"] + e["dur"])
    assert ends and all(len(v) == 2 and max(v) - min(v) < 0.01 for v in ends.values())


def test_dp_figures_01_and_02_label_ranks_and_wrap_their_panels(run):
    """A DP run's cells differ by rank (rank 0 decodes 4 requests, rank 1 is idle): not a
    batch-size trend, and its 4 cells' panels wrap instead of standing in one row."""
    data = load_run(run)
    fig = figures()["syncs_by_region"].draw(data)
    titles = [ax.get_title() for ax in fig.axes]
    assert any("rank 0 (batch 4)" in t for t in titles) and any(
        "rank 1 (idle)" in t for t in titles
    )
    assert not any("batch size" in t for t in titles)
    fig = figures()["syncs_vs_batch"].draw(data)
    drawn = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert {ax.get_xlabel() for ax in drawn} == {"DP-attention rank"}
    ticks = {t.get_text() for ax in drawn for t in ax.get_xticklabels()}
    assert ticks == {"rank 0\n(batch 4)", "rank 1\n(idle)"}
    assert all(
        not line.get_linestyle() or line.get_linestyle() == "None"
        for ax in drawn
        for line in ax.get_lines()
    )
    columns = {round(ax.get_position().x0, 2) for ax in drawn}
    assert len(columns) <= 3 and fig.get_figwidth() <= 3 * 5.5


def test_a_dp_run_shown_with_another_run_and_in_the_notebooks(run, tmp_path):
    """Shown together with a run of another world, the DP figures read the DP run's own
    meta.json; the notebooks draw the serving figures from each DP cell as its own scenario,
    as the report does."""
    from harness.report import combine_runs, serving_rows
    from harness.report.sync_plots import plot_syncs_by_region
    from harness.results.load import rows_of
    from tests.support.report_fixtures import write_run

    dp = load_run(run)
    other = load_run(write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2))
    both = combine_runs([dp, other])
    fig = figures()["dp_syncs_per_rank"].draw(rows_of(both, "dp"))
    assert {ax.get_title() for ax in fig.axes if ax.axison} == set(dp.meta["dp"]["cells"])
    cells = serving_rows(both).counts
    assert set(cells["scenario"]) == {
        "eagle",
        *(f"dp_attention/{c}" for c in dp.meta["dp"]["cells"]),
    }
    plot_syncs_by_region(serving_rows(dp).counts, dp.label)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("builder", "stopped_by"),
    # rank 0 waits in the exchange when its peer dies (the collective fails, or the launcher's
    # SIGTERM comes first), or is busy on the host and gets the launcher's SIGTERM there
    [(dying_builder, {"RuntimeError", "RankStopped"}), (dying_builder_peer_busy, {"RankStopped"})],
)
def test_a_rank_that_dies_leaves_an_incomplete_run_with_its_outcome(
    tmp_path, monkeypatch, builder, stopped_by
):
    loaded = load_scenario("dp_attention", overridden(SETTINGS, "dp.timeout_s=10", "dp.streams=[]"))
    job = RankJob(loaded, "emu", "both", tmp_path, new_run_id(), builder=builder)
    killed = []  # ranks the launcher had to SIGKILL: those that outlived its 30 s grace
    kill = multiprocessing.process.BaseProcess.kill
    monkeypatch.setattr(
        multiprocessing.process.BaseProcess, "kill", lambda p: (killed.append(p.pid), kill(p))
    )
    with pytest.raises(CheckFailed, match=f"rank {DYING_RANK} \\(exit code {EXIT_CODE}\\)"):
        launch_local(job)
    assert killed == []  # rank 0 ended itself after the launcher's SIGTERM
    folder = tmp_path / "dp_attention" / job.run_id
    assert (folder / INCOMPLETE_MARKER).exists() and not is_complete(folder)
    outcomes = _table(folder, "outcomes")
    dead = outcomes[outcomes["rank"] == DYING_RANK]
    assert len(dead) == 4 * 2 and set(dead["status"]) == {"lost"}  # every cell and pass
    first = outcomes[(outcomes["rank"] == 0) & (outcomes["status"] != "not_run")]
    assert list(first["status"]) == ["error"]  # its exchange with the dead rank failed
    assert set(first["exception"]) <= stopped_by
    stopped = json.loads((folder / "meta.json").read_text())["stopped"]
    # nobody waited for the dead rank: its exchange and the gather failed at once, on the closed
    # connection or the SIGTERM, not after a collective's timeout
    for why in (*first["message"], stopped):
        assert not re.search(r"time[sd]? ?out", why, re.IGNORECASE), why
