"""Committed evidence keeps opening: every run folder under results/ is read with today's code
(older result formats upgraded in memory, the files untouched), summarised, and each world's
figures drawn from one of its runs."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from harness.report.figures import drawable
from harness.results.load import load_run
from harness.results.read import read_meta
from harness.results.summary import format_summary
from harness.results.tables import COLUMNS, FORMAT_VERSION
from harness.results.upgrade import STEPS

REPO = Path(__file__).resolve().parents[2]
RUNS = sorted(p.parent for p in (REPO / "results").rglob("meta.json")
              if "result_format" in json.loads(p.read_text()))  # fmt: skip


def test_there_are_committed_runs_of_older_formats() -> None:
    versions = {json.loads((r / "meta.json").read_text())["result_format_version"] for r in RUNS}
    assert min(versions) < FORMAT_VERSION, "nothing here exercises the upgrade"


@pytest.mark.parametrize("run", RUNS, ids=lambda r: str(r.relative_to(REPO)))
def test_every_committed_run_folder_opens(run: Path) -> None:
    data = load_run(run)
    assert data.meta["result_format_version"] == FORMAT_VERSION
    for table in COLUMNS:
        assert list(getattr(data, table).columns[: len(COLUMNS[table])]) == list(COLUMNS[table])
    assert len(data.counts) == data.meta["rows"]["counts"]


def _smallest_run_per_world() -> list[Path]:
    """Per world, its committed run of the fewest bytes (every world's figures and summary are
    drawn from one; each folder's upgrade is what the test above reads)."""
    chosen: dict[str, Path] = {}
    for run in sorted(RUNS, key=lambda r: sum(f.stat().st_size for f in r.glob("*.csv"))):
        chosen.setdefault(read_meta(run)["world"], run)
    return list(chosen.values())


@pytest.mark.slow
@pytest.mark.parametrize("run", _smallest_run_per_world(), ids=lambda r: r.parent.name)
def test_each_world_summarises_and_draws_a_committed_run(run: Path) -> None:
    """Every figure the report would write is drawn from the upgraded tables (not encoded as
    PNG: the encoding reads no data)."""
    assert format_summary(run)
    figures, _ = drawable(load_run(run))
    assert figures, run
    for _stem, spec, rows in figures:
        plt.close(spec.draw(rows))


def test_a_format_4_dp_run_splits_its_case_out_of_the_scenario(tmp_path: Path) -> None:
    (dp,) = {r for r in RUNS if "dp_attention" in r.parts and r.name.endswith("4aff")}
    data = load_run(dp)
    assert set(data.counts["scenario"]) == {"dp_attention"}
    assert set(data.counts["case"]) == set(data.meta["dp"]["cells"])
    assert data.waits.empty and set(data.counts["process"]) == {0}


def test_every_format_since_the_oldest_upgrade_has_a_step() -> None:
    assert sorted(STEPS) == list(range(min(STEPS), FORMAT_VERSION))
