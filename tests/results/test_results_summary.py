"""The summary and `compare`: rates per step of each kind that add up as printed, each variant
against `before` with its interval, cells matched exactly and missing shown as missing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from harness.errors import InputError
from harness.results.compare import compare_runs
from harness.results.deltas import format_time_delta
from harness.results.stats import Interval
from harness.results.summary import format_summary
from tests.support.report_fixtures import reseal, write_run

NUM = r"[+−]\d+\.\d\d"
DELTA_LINE = re.compile(
    rf"^  bs=\d+ \w+ vs before: {NUM} syncs per decode step, ({NUM} per prefill step|no prefill "
    r"steps); "
    r"Δ p50 = [+−][\d.]+ µs \[95% CI [+−][\d.]+, [+−][\d.]+\](: no measurable difference)?$"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "eagle": write_run(root, "eagle", device="cuda", batch_sizes=(8, 96)),
        "nonspec": write_run(root, "nonspec", device="emu", batch_sizes=(8, 96)),
    }


def _sync_table(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Syncs per measured step"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("(measured steps per cell"))
    return lines[start + 1 : end]


def _parse(table: list[str]) -> tuple[list[tuple[int, int]], list[tuple[str, list[str]]]]:
    """Column spans of the numbers (from the header's last line) and each row's cells."""
    header = table[1]
    spans = [m.span() for m in re.finditer(r"\S+", header)][1:]  # after the "step" label
    rows = []
    for ln in table[3:]:
        cells = [ln[a:b].strip() for a, b in spans]  # numbers are right-aligned in the header
        rows.append((ln[: spans[0][0]], cells))
    return spans, rows


@pytest.mark.parametrize("scenario", ["eagle", "nonspec"])
def test_printed_sync_table_adds_up(runs, scenario):
    """Per cell and column (batch size × kind of step), the printed region rows sum to the
    printed TOTAL (within the rounding of what is printed)."""
    _spans, rows = _parse(_sync_table(format_summary(runs[scenario])))
    blocks: list[list[tuple[str, list[str]]]] = []
    for head, cells in rows:
        if "TOTAL" in head:
            blocks.append([])
        blocks[-1].append((head, cells))
    assert len(blocks) == 3  # one TOTAL per variant
    checked = 0
    for block in blocks:
        (_h, total), regions = block[0], block[1:]
        for j, t in enumerate(total):
            if not t:
                continue
            parts = [float(c[j]) for _h, c in regions if c[j]]
            assert sum(parts) == pytest.approx(float(t), abs=0.005 * (len(parts) + 1))
            checked += 1
    assert checked >= 6


def test_rates_per_step_of_that_kind_in_the_summary(runs):
    """nonspec (fixture): a prefill step every 4th step; after reads a max length in each
    eager pass: 1.00 per prefill step at batch 8, 0.00 per decode step there (per step of all
    kinds it would read 0.25). before failed at 96: blank, never 0."""
    rows = _parse(_sync_table(format_summary(runs["nonspec"])))[1]
    after = next(cells for head, cells in rows if "TOTAL" in head and "after" in head)
    before = next(cells for head, cells in rows if "TOTAL" in head and "before" in head)
    assert after == ["0.00", "1.00", "1.00", "1.00"]  # bs=8 decode, prefill; bs=96 (eager)
    assert before == ["0.00", "1.00", "", ""]
    assert "(measured steps per cell: 9 decode, 3 prefill)" in format_summary(runs["nonspec"])


def test_each_variant_against_before(runs):
    text = format_summary(runs["eagle"])
    lines = [ln for ln in text.splitlines() if " vs before: " in ln]
    assert len(lines) == 4 and all(DELTA_LINE.match(ln) for ln in lines), lines
    # fixture e2e: 25 µs per sync; dropped makes 2 fewer per decode step than before at 8
    dropped8 = next(ln for ln in lines if ln.startswith("  bs=8 dropped"))
    assert dropped8.startswith(
        "  bs=8 dropped vs before: −2.00 syncs per decode step, no prefill steps; Δ p50 = −"
    )
    assert "no measurable difference" not in dropped8
    assert re.search(r"Δ p50 = −(3\d|4\d|5\d)\.\d µs", dropped8), dropped8
    emu = [ln for ln in format_summary(runs["nonspec"]).splitlines() if " vs before: " in ln]
    assert emu and all(DELTA_LINE.match(ln) for ln in emu), emu
    assert any("+0.00 per prefill step" in ln for ln in emu)


def test_time_delta_verdict():
    assert format_time_delta(Interval(-412.3, -530.2, -290.0, 200)) == (
        "Δ p50 = −412 µs [95% CI −530, −290]"
    )
    held = format_time_delta(Interval(-12.0, -40.0, 15.0, 200))
    assert held == "Δ p50 = −12.0 µs [95% CI −40.0, +15.0]: no measurable difference"


def test_compare_shows_missing_never_zero(runs, tmp_path):
    a = runs["eagle"]
    b = tmp_path / "eagle" / a.name
    shutil.copytree(a, b)
    counts = pd.read_csv(b / "counts.csv", keep_default_na=False)
    drop = (counts["variant"] == "after") & (counts["batch_size"] == 96)
    counts[~drop].to_csv(b / "counts.csv", index=False)
    lat = pd.read_csv(b / "latency.csv", keep_default_na=False)
    lat[~((lat["variant"] == "after") & (lat["batch_size"] == 96))].to_csv(
        b / "latency.csv", index=False
    )
    reseal(b, "counts.csv", "latency.csv")  # a run that lacks the cell, not a damaged one
    text = compare_runs(a, b)
    assert "eagle bs=96 after: missing in B" in text
    rows = [ln for ln in text.splitlines() if re.match(r"^eagle\s+after\s+auto\s+96\b", ln)]
    assert rows and all(ln.split()[-2:] == ["missing", "missing"] for ln in rows), rows
    same = [ln for ln in text.splitlines() if ln.startswith("eagle bs=8 before: ")]
    assert same and "+0.00 syncs per decode step" in same[0]


def test_compare_matches_by_path(runs, tmp_path):
    """A region whose syncs moved from the graph to the eager path is a change, not a match."""
    a = runs["eagle"]
    b = tmp_path / "eagle" / a.name
    shutil.copytree(a, b)
    counts = pd.read_csv(b / "counts.csv", keep_default_na=False)
    move = (counts["region"] == "step/scheduler/mirror") & (counts["path"] == "graph")
    counts.loc[move, "path"] = "eager"
    counts.to_csv(b / "counts.csv", index=False)
    reseal(b, "counts.csv")
    text = compare_runs(a, b)
    moved = [ln for ln in text.splitlines() if "step/scheduler/mirror" in ln and "graph" in ln]
    assert moved and all("missing" in ln for ln in moved)


def test_compare_refuses_other_scenarios_unless_asked(runs, capsys):
    with pytest.raises(InputError, match="different scenarios"):
        compare_runs(runs["eagle"], runs["nonspec"])
    assert main(["compare", str(runs["eagle"]), str(runs["nonspec"])]) == 2
    assert "--other-scenario" in capsys.readouterr().err
    assert main(["compare", str(runs["eagle"]), str(runs["nonspec"]), "--other-scenario"]) == 0
    assert "* bs=8 before:" in capsys.readouterr().out


def test_a_time_only_run_is_compared_on_time_alone(tmp_path):
    folder = write_run(tmp_path, "eagle", device="cuda", batch_sizes=(8,))
    counts = folder / "counts.csv"
    counts.write_text(counts.read_text().splitlines()[0] + "\n")  # a `--pass time` run
    reseal(folder, "counts.csv")
    lines = [ln for ln in format_summary(folder).splitlines() if " vs before: " in ln]
    assert len(lines) == 2 and all(ln.split(": ")[1].startswith("no count pass;") for ln in lines)
    assert all("Δ p50 = " in ln for ln in lines)
