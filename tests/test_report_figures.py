"""`python -m harness report`: every figure renders from a run folder, also from a thin one."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from report_fixtures import drop_time_pass, reseal, write_run

from harness.cli import main
from harness.report import FIGURES, load_run, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    write_run(root, "eagle", device="cuda", batch_sizes=(1, 8, 96), steps=6)
    write_run(
        root,
        "nonspec",
        device="emu",
        batch_sizes=(8, 96),
        steps=6,
        start_time="2026-01-02T00:00:00+00:00",
    )
    return root


def _texts(fig) -> str:
    """Every piece of text on a figure (titles, labels, legends, tick labels)."""
    return " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


def test_report_command_writes_every_png(root, capsys):
    assert main(["report", "--root", str(root)]) == 0  # no RUN: the newest run (nonspec)
    plots = root / "nonspec" / "20260101T000000Z-0000" / "plots"
    files = sorted(plots.glob("*.png"))
    assert [f.stem.split("_", 1)[1] for f in files] == list(FIGURES)
    assert all(f.read_bytes()[:8] == PNG_MAGIC for f in files)
    assert "emulated device" in capsys.readouterr().out


def test_emulated_run_is_labelled_host_only(root):
    run = load_run(root / "nonspec" / "20260101T000000Z-0000")
    for name in ("latency_ecdf", "host_device_e2e", "latency_vs_batch", "bubble_cost"):
        text = _texts(FIGURES[name](run))
        assert "emulated device" in text, name
        assert "end-to-end step time" not in text.replace("no device or end-to-end", ""), name


def test_gpu_run_shows_three_metrics_and_units(root):
    run = load_run(root / "eagle" / "20260101T000000Z-0000")
    text = _texts(FIGURES["host_device_e2e"](run))
    for what in ("host time", "device time", "end-to-end step time", "(µs)"):
        assert what in text
    assert "µs per extra sync" in _texts(FIGURES["bubble_cost"](run))
    assert "(eager)" in _texts(FIGURES["syncs_vs_batch"](run))  # bs 96 ran without a graph


def test_count_only_run_still_renders(tmp_path):
    folder = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=3)
    drop_time_pass(folder)  # a `--pass count` run has no time samples
    written = write_report(load_run(folder), tmp_path / "out")
    assert len(written) == len(FIGURES)
    run = load_run(folder)
    assert "no time-pass samples" in _texts(FIGURES["latency_ecdf"](run))


def test_no_syncs_and_no_findings_say_so(tmp_path):
    folder = write_run(tmp_path, "nonspec", device="emu", batch_sizes=(8,), steps=3)
    for name in ("syncs", "findings"):
        path = folder / f"{name}.csv"
        path.write_text(path.read_text().splitlines()[0] + "\n")
    counts = folder / "counts.csv"
    lines = counts.read_text().splitlines()
    counts.write_text("\n".join([lines[0], *(ln.rsplit(",", 1)[0] + ",0" for ln in lines[1:])]))
    reseal(folder, "syncs.csv", "findings.csv", "counts.csv")
    run = load_run(folder)
    assert "no syncs in any measured step" in _texts(FIGURES["syncs_by_region"](run))
    assert "nothing to blame" in _texts(FIGURES["sync_blame"](run))
    assert "no findings" in _texts(FIGURES["findings"](run))


def test_failed_cell_is_named(root):
    run = load_run(root / "nonspec" / "20260101T000000Z-0000")
    text = _texts(FIGURES["findings"](run))
    assert "FAILED" in text and "AssertionError" in text and "metadata.py:120" in text


def test_bad_run_is_usage_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main(["report", "--root", str(tmp_path)]) == 2


def test_several_scenarios_side_by_side(root, tmp_path):
    runs = [str(p) for p in sorted(root.glob("*/*")) if (p / "meta.json").exists()]
    assert main(["report", *runs, "--out", str(tmp_path)]) == 0
    assert len(list(tmp_path.glob("*.png"))) == len(FIGURES)
    assert main(["report", *runs]) == 2  # several runs need --out
    assert main(["report", runs[0], runs[0], "--out", str(tmp_path)]) == 2  # same scenario twice
