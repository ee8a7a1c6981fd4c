"""`python -m harness report`: every figure renders from a run folder, also from a thin one."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from harness.cli import main
from harness.report import load_run
from harness.report.sync_plots import plot_blame
from harness.results.waits import step_breakdown
from harness.serving.plugin import figures
from tests.support.report_fixtures import drop_time_pass, reseal, write_run

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


SERVING_FIGURES = list(figures())
TRACED_ONLY = ["step_breakdown"]  # drawn from traced steps: a GPU run's


def _draw(name: str, run):
    return figures()[name].draw(run)


def test_report_command_writes_every_png(root, capsys):
    assert main(["report", "--root", str(root)]) == 0  # no RUN: the newest run (nonspec)
    plots = root / "nonspec" / "20260101T000000Z-0000" / "plots"
    files = sorted(plots.glob("*.png"))
    # an emulated serving run: every serving figure but the traced steps', no sync-cost one
    drawn = [f.stem.split("_", 1)[1] for f in files]
    assert drawn == [f for f in SERVING_FIGURES if f not in TRACED_ONLY]
    assert all(f.read_bytes()[:8] == PNG_MAGIC for f in files)
    out = capsys.readouterr().out
    assert "emulated device" in out
    assert [ln for ln in out.splitlines() if "not drawn" in ln] == [
        "not drawn (no traced steps in this run: device time not measured): 08_step_breakdown.png"
    ]


def test_a_gpu_run_draws_where_the_step_time_goes(root):
    run = load_run(root / "eagle" / "20260101T000000Z-0000")
    parts = step_breakdown(run.traced_waits, run.traced_latency)
    before = parts[(parts["variant"] == "before") & (parts["batch_size"] == 8)]
    got = dict(zip(before["part"], before["us_per_step"]))
    # busy 250, span 900; the mirror's read cost min(8, 600) = 8, the results' wait 5
    assert got == {
        "kernels": 250.0,
        "idle caused: harness/serving/mirror.py:126": 8.0,
        "idle caused: harness/serving/world.py:312": 5.0,
        "other idle": 900.0 - 250.0 - 13.0,
    }
    assert _draw("step_breakdown", run).axes


def test_emulated_run_is_labelled_host_only(root):
    run = load_run(root / "nonspec" / "20260101T000000Z-0000")
    for name in ("latency_ecdf", "host_device_e2e", "latency_vs_batch"):
        text = _texts(_draw(name, run))
        assert "emulated device" in text, name
        assert "end-to-end step time" not in text.replace("no device or end-to-end", ""), name


def test_gpu_run_shows_three_metrics_and_units(root):
    run = load_run(root / "eagle" / "20260101T000000Z-0000")
    text = _texts(_draw("host_device_e2e", run))
    for what in ("host time", "device time", "end-to-end step time", "(µs)"):
        assert what in text
    assert "(eager)" in _texts(_draw("syncs_vs_batch", run))  # bs 96 ran without a graph


def test_latency_vs_batch_shows_the_interval(root):
    run = load_run(root / "eagle" / "20260101T000000Z-0000")
    fig = _draw("latency_vs_batch", run)
    assert "95% CI" in _texts(fig) and "interval of the median" in _texts(fig)
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 3  # one median line with its interval bars per variant
    for container in bars:
        (segments,) = container.lines[2]
        lengths = [abs(seg[1][1] - seg[0][1]) for seg in segments.get_segments()]
        assert len(lengths) == 3 and all(length > 0 for length in lengths)


def test_syncs_by_region_keeps_batch_sizes_apart(root):
    """before makes 4 syncs per step at batch 1 and 8, and 6 at 96 (eager): each panel shows
    one batch size, its regions add up to its total, and no mean over sizes (4.67) appears."""
    run = load_run(root / "eagle" / "20260101T000000Z-0000")
    fig = _draw("syncs_by_region", run)
    totals = {}
    for ax in fig.axes:
        title_text = ax.get_title()
        if "batch size" not in title_text:
            continue
        for bars in ax.containers:
            if not isinstance(bars, BarContainer):
                continue
            widths = [p.get_width() for p in bars.patches]  # total first, then the regions
            assert widths[0] == pytest.approx(sum(widths[1:])), (title_text, bars.get_label())
            if bars.get_label() == "before":
                totals[title_text.split(" · ")[1]] = widths[0]
    assert totals == {"batch size 1": 4.0, "batch size 8": 4.0, "batch size 96": 6.0}
    assert "4.67" not in _texts(fig)


def test_blame_is_per_variant_and_fits_a_laptop(root, tmp_path):
    run = load_run(root / "eagle" / "20260101T000000Z-0000")
    fig = plot_blame(run.syncs, run.counts, run.label, top=2)
    width_px, height_px = (fig.get_size_inches() * 110).tolist()
    assert width_px <= 1700 and height_px >= 0.25 * width_px  # no 2433 x 242 strip
    cells = [
        c.get_text().get_text()
        for ax in fig.axes
        for t in ax.tables
        for c in t.get_celld().values()
    ]
    text = _texts(fig) + " " + " ".join(cells)
    assert "other line(s)" in text  # past the top 2 of before's 4 lines: summed
    before = fig.axes[0].tables[0]
    assert max(r for r, _c in before.get_celld()) == 3  # 2 lines and the rest, under a header
    for col in ("bs=1", "bs=8", "bs=96", "step", "before", "after", "dropped"):
        assert col in text
    assert "3.00" in text  # max-len reads of before at 96, not averaged over sizes


def test_count_only_run_draws_no_latency_figures(tmp_path, capsys):
    folder = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=3)
    drop_time_pass(folder)  # a `--pass count` run has no time samples
    out = tmp_path / "out"
    assert main(["report", str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    written = [ln.strip() for ln in printed if ln.startswith("  ")]
    names = [Path(p).stem.split("_", 1)[1] for p in written]
    assert names == ["syncs_by_region", "syncs_vs_batch", "sync_blame", "findings"]
    assert sorted(str(p) for p in out.iterdir()) == written  # nothing but what it says it wrote
    notes = [ln for ln in printed if "not drawn" in ln]
    assert notes == [
        "not drawn (no time pass in this run): 05_latency_ecdf.png, 06_host_device_e2e.png, "
        "07_latency_vs_batch.png",
        "not drawn (no traced steps in this run: device time not measured): 08_step_breakdown.png",
    ]


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
    assert "no syncs in these steps" in _texts(_draw("syncs_by_region", run))
    assert "nothing to blame" in _texts(_draw("sync_blame", run))
    assert "no findings" in _texts(_draw("findings", run))


def test_failed_cell_is_named(root):
    run = load_run(root / "nonspec" / "20260101T000000Z-0000")
    text = _texts(_draw("findings", run))
    assert "FAILED" in text and "AssertionError" in text and "metadata.py:120" in text


def test_bad_run_is_usage_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main(["report", "--root", str(tmp_path)]) == 2


@pytest.mark.slow
def test_several_scenarios_side_by_side(root, tmp_path):
    runs = [str(p) for p in sorted(root.glob("*/*")) if (p / "meta.json").exists()]
    assert main(["report", *runs, "--out", str(tmp_path)]) == 0
    assert len(list(tmp_path.glob("*.png"))) == len(SERVING_FIGURES)  # eagle's traced steps
    assert main(["report", *runs]) == 2  # several runs need --out
    assert main(["report", runs[0], runs[0], "--out", str(tmp_path)]) == 2  # same scenario twice
