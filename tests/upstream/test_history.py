"""`fidelity --history`: a release's cells held against every variant, the table of syncs per
cell and release, what each release changed, and a drifted release's line (exit 2)."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.upstream.cells import CELLS, Outcome
from harness.upstream.execute import CellResult, Execution
from harness.upstream.history import ReleaseRun, render_history
from harness.upstream.releases import DEFAULT_RELEASES, sorted_releases
from harness.variants import variant_names


@pytest.mark.slow
def test_a_release_runs_against_every_variant(capsys) -> None:
    release = next(r for r in DEFAULT_RELEASES if r.variant == "dropped")
    argv = ["fidelity", "--history", "--releases", release.version, "--device", "emu"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    agreement = next(line for line in out.splitlines() if line.startswith(f"| {release.version} |"))
    cells = agreement.strip("| ").split(" | ")[1:]
    assert len(cells) == len(variant_names())
    full = f"{len(CELLS)} of {len(CELLS)}"
    assert [c == full for c in cells] == [v == "dropped" for v in variant_names()], agreement
    assert all(f"| {cell.name} |" in out for cell in CELLS)


def _run(version: str, outcome: Outcome) -> ReleaseRun:
    results = [CellResult(cell, outcome, Outcome()) for cell in CELLS]
    return ReleaseRun(version, [Execution(version, v, (), results) for v in variant_names()])


def test_the_table_names_what_a_release_changed_and_a_drifted_release() -> None:
    site = ("d2h_read", "/t/sglang/srt/layers/x.py:7", "build")
    runs = [
        _run("0.5.14", Outcome(syncs=[site])),
        _run("0.5.15", Outcome(syncs=[(site[0], "/t/sglang/srt/layers/x.py:9", "build")])),
        _run("0.5.16", Outcome()),
        ReleaseRun("0.5.17", [], drift="x.py:3 reads model_runner.y, which the stand-in lacks"),
    ]
    text = render_history(runs)
    assert "- **0.5.15**: no cells changed" in text  # a line moved, the sync did not
    assert f"- **0.5.16**: {len(CELLS)} cells changed" in text
    assert "d2h_read layers/x.py:9 `build` → none" in text
    assert "- **0.5.17**: not run: x.py:3 reads model_runner.y" in text
    first = next(line for line in text.splitlines() if line.startswith(f"| {CELLS[0].name} |"))
    assert first.endswith("| D2H | D2H | - | drift |")


def test_releases_are_ordered_from_the_backends_first_on() -> None:
    got = sorted_releases(["0.5.16", "0.5.15.post1", "0.5.9", "0.5.15", "0.5.14", "0.4.10"])
    assert got == ["0.5.14", "0.5.15", "0.5.15.post1", "0.5.16"]


@pytest.mark.parametrize(
    "argv",
    [
        ["fidelity", "--releases", "0.5.16"],
        ["fidelity", "--history", "--releases", "0.5.x"],
        ["fidelity", "--history", "--releases", "0.5.13"],
        ["fidelity", "--history", "--compare-to", "after", "--releases", "0.5.16"],
    ],
)
def test_bad_history_arguments_are_one_line_and_exit_2(argv, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--" in err[0]
