"""Every reader of a run folder refuses a file that does not match meta.json (exit 2, one line
naming the file): a table cut off mid-row, left header-only or emptied is never summarised,
compared, plotted or traced as if whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import InputError
from harness.results.read import read_table
from harness.results.summary import format_summary
from tests.support.report_fixtures import write_run


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut mid-row":
        cut = data[: len(data) // 2]
        assert not cut.endswith(b"\n")
        path.write_bytes(cut)
    elif how == "header only":
        path.write_bytes(data.splitlines(keepends=True)[0])
    else:
        path.write_bytes(b"")


DAMAGE = ["cut mid-row", "header only", "empty"]


@pytest.fixture
def run(tmp_path) -> Path:
    return write_run(tmp_path / "runs", "nonspec", device="emu", batch_sizes=(8, 96), steps=4)


def test_whole_tables_read(run):
    meta = json.loads((run / "meta.json").read_text())
    assert meta["rows"]["counts"] > 0 and meta["rows"]["latency"] > 0
    for table, rows in meta["rows"].items():
        assert len(read_table(run, table)) == rows
    assert set(meta["sha256"]) == set(meta["files"])


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("table", ["counts", "latency"])
def test_damaged_table_is_refused_by_the_reader(run, table, how):
    path = run / f"{table}.csv"
    _damage(path, how)
    with pytest.raises(InputError) as ei:
        read_table(run, table)
    assert str(ei.value).startswith(f"{path}: does not match meta.json")
    with pytest.raises(InputError, match="does not match"):
        format_summary(run)


def _one_line_naming(capsys, path: Path) -> None:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"error: {path}: does not match meta.json"), err


@pytest.mark.parametrize("how", DAMAGE)
def test_compare_refuses_instead_of_showing_a_fake_improvement(tmp_path, run, capsys, how):
    other = write_run(tmp_path / "other", "nonspec", device="emu", batch_sizes=(8, 96), steps=4)
    _damage(other / "counts.csv", how)
    assert main(["compare", str(run), str(other)]) == 2
    _one_line_naming(capsys, other / "counts.csv")


@pytest.mark.parametrize("command", ["report", "trace"])
def test_report_and_trace_refuse_a_cut_table(run, capsys, command, tmp_path):
    _damage(run / "counts.csv", "cut mid-row")
    out = ["--out", str(tmp_path / "plots")] if command == "report" else ["-o", str(tmp_path / "t")]
    assert main([command, str(run), *out]) == 2
    _one_line_naming(capsys, run / "counts.csv")
    assert not (tmp_path / "plots").exists() and not (tmp_path / "t").exists()


def test_changed_stacks_are_refused(run, capsys):
    (run / "stacks.json").write_text("{}")
    assert main(["trace", str(run)]) == 2
    _one_line_naming(capsys, run / "stacks.json")


def test_run_without_checksums_is_refused(run):
    meta = json.loads((run / "meta.json").read_text())
    del meta["sha256"]
    (run / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"counts\.csv: meta\.json records no checksum"):
        read_table(run, "counts")
