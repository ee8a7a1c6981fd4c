"""The report's loader and tables, on a synthetic run folder in the runner's format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import InputError
from harness.report import find_runs, load_run, tables
from tests.support.report_fixtures import reseal, write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "eagle": write_run(root, "eagle", device="cuda"),
        "nonspec": write_run(root, "nonspec", device="emu", start_time="2026-01-02T00:00:00+00:00"),
    }


def test_newest_complete_run_is_the_default(runs):
    root = runs["eagle"].parents[1]
    assert load_run(None, root=root).path == runs["nonspec"]
    assert [p.parent.name for p in find_runs(root)] == ["eagle", "nonspec"]


def test_incomplete_run_is_refused(tmp_path):
    folder = write_run(tmp_path, "eagle")
    (folder / "INCOMPLETE").write_text("started")
    with pytest.raises(InputError, match="incomplete"):
        load_run(folder)
    with pytest.raises(InputError, match="no complete run"):
        load_run(None, root=tmp_path)


def test_unknown_unit_names_file_and_key(tmp_path):
    folder = write_run(tmp_path, "nonspec", device="emu")
    lat = pd.read_csv(folder / "latency.csv")
    lat.loc[0, "unit"] = "furlong"
    lat.to_csv(folder / "latency.csv", index=False)
    reseal(folder, "latency.csv")
    with pytest.raises(InputError, match=r"latency\.csv: unit"):
        load_run(folder)


def test_device_label(runs):
    assert load_run(runs["nonspec"]).is_emulated
    assert "host times only" in load_run(runs["nonspec"]).label
    assert "H200" in load_run(runs["eagle"]).label


def test_total_syncs_per_step_by_batch_size(runs):
    # fixture: eagle has the mirror sync (outside any forward pass) every step, a pad sync in
    # draft-extend, `before`'s verify list, and a max-len read per eager pass except in
    # `dropped` (draft-extend always runs eagerly). Every eagle step is a decode step.
    t = tables.total_syncs_by_batch(load_run(runs["eagle"]).counts)
    assert set(t["step_kind"]) == {"decode"}
    got = {(r.variant, r.batch_size): r.per_step for r in t.itertuples()}
    expected = {"before": (4, 6), "after": (3, 5), "dropped": (2, 2)}
    for variant, (graph, eager) in expected.items():
        assert [got[(variant, b)] for b in (1, 8, 64)] == [graph] * 3
        assert got[(variant, 96)] == eager  # 96 > bucket: decode and verify ran eagerly
    assert tables.eager_batch_sizes(load_run(runs["eagle"]).counts) == {"eagle": [96]}


def test_rates_are_per_step_of_that_kind(runs):
    """nonspec: a prefill (EXTEND) step every 4th step; before/after read a max length in each
    eager pass, so 1 per prefill step at every size, and 1 per decode step only at 96 (eager).
    Dividing by all steps would read 3/12 = 0.25 per step."""
    t = tables.total_syncs_by_batch(load_run(runs["nonspec"]).counts)
    got = {(r.variant, r.batch_size, r.step_kind): (r.per_step, r.steps) for r in t.itertuples()}
    assert got[("after", 8, "prefill")] == (1.0, 3)
    assert got[("after", 8, "decode")] == (0.0, 9)
    assert got[("after", 96, "decode")] == (1.0, 9)
    assert got[("dropped", 8, "prefill")] == (0.0, 3)


def test_warmup_syncs_are_not_per_step(runs):
    counts = load_run(runs["eagle"]).counts
    assert counts.loc[counts["path"] == "warmup", "syncs"].sum() > 0
    m = tables.measured(counts)
    assert not m["path"].isin(["warmup", "capture"]).any()
    assert m["step"].min() == 2  # the fixture's 2 warm-up steps are excluded


def test_blame_table_per_variant_batch_size_and_kind(runs):
    run = load_run(runs["eagle"])
    b = tables.blame_table(run.syncs, run.counts)
    verify = b[b["function"] == "verify_lengths"]
    assert set(verify["label"]) == {"before"} and (verify["per_step"] == 1.0).all()
    max_len = b[(b["function"] == "_build_forward_metadata") & (b["label"] == "before")]
    rates = dict(zip(max_len["batch_size"], max_len["per_step"]))
    # draft-extend is always eager; decode and verify too at 96 only: each size apart
    assert rates == {1: 1.0, 8: 1.0, 64: 1.0, 96: 3.0}
    mirror = b[b["function"] == "blocking_copy"]
    assert set(mirror["forward_modes"]) == {"DECODE"}  # the step's mode, outside any pass
    assert (mirror["per_step"] == 1.0).all() and set(mirror["step_kind"]) == {"decode"}


def test_findings_use_count_pass_and_keep_zero_cells(runs):
    run = load_run(runs["eagle"])
    f = tables.findings_per_cell(run.findings, run.counts)
    assert len(f) == 12  # 3 variants x 4 batch sizes, zero rows included
    assert (f.loc[f["variant"] == "dropped", "findings"] == 0).all()
    assert (f.loc[f["variant"] == "before", "per_step"] > 0).all()


def test_failed_cells_listed(runs):
    failed = tables.failed_cells(load_run(runs["nonspec"]).outcomes)
    assert set(failed["pass"]) == {"count", "time"}
    assert (failed["exception"] == "AssertionError").all()


def test_step_latency_and_median_intervals(runs):
    run = load_run(runs["eagle"])
    steps = tables.step_latency(run.latency)
    assert set(steps["metric"]) == {"host", "device", "e2e"}
    assert tables.headline_metric(steps) == "e2e"
    med = tables.median_intervals(steps[steps["metric"] == "e2e"])
    assert len(med) == 3 * 4 and (med["n"] == 12).all()
    assert ((med["lo_us"] <= med["p50_us"]) & (med["p50_us"] <= med["hi_us"])).all()
    emu = load_run(runs["nonspec"])
    assert tables.headline_metric(tables.step_latency(emu.latency)) == "host"


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["before", "after"]),
            st.sampled_from([1, 8]),
            st.integers(0, 3),
            st.sampled_from(["DECODE", "EXTEND", ""]),
            st.sampled_from(["graph", "eager", "warmup", "setup"]),
            st.sampled_from(["step", "step/a", "step/b"]),
            st.integers(0, 4),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_regions_add_up_to_the_total(rows):
    counts = pd.DataFrame(
        [("s", "", v, "auto", b, 0, "", step, m, p, r, n) for v, b, step, m, p, r, n in rows],
        columns=[*tables.CELL_KEYS, "step", "forward_mode", "path", "region", "syncs"],
    )
    by_region = tables.syncs_by_region(counts)
    total = tables.total_syncs_by_batch(counts)
    keys = ["variant", "batch_size", "step_kind"]
    summed = by_region.groupby(keys)["per_step"].sum()
    assert summed.to_dict() == pytest.approx(total.set_index(keys)["per_step"].to_dict())
    # every sync of a measured step is counted in exactly one kind of step
    assert total["syncs"].sum() == tables.measured(counts)["syncs"].sum()


def test_report_reads_files_only(runs):
    """Loading and plotting never import torch, the backend, the ledger or the serving model
    (files only; the worlds' plugins, which the tables read their vocabulary from, are light)."""
    code = (
        "import sys; from harness.report import load_run, tables; "
        "import harness.report.trace, harness.report.notebooks, harness.commands.report; "
        f"run = load_run({str(runs['eagle'])!r}); tables.blame_table(run.syncs, run.counts); "
        "bad = [m for m in sys.modules if m.split('.')[0] == 'torch' "
        "or m.split('.')[:2] in (['harness', 'backend'], ['harness', 'batch'], "
        "['harness', 'sync']) or m in ('harness.serving.world', 'harness.runner.count_pass')]; "
        "print(json.dumps(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"import json; {code}"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_missing_column_names_file_and_column(tmp_path):
    folder = write_run(tmp_path, "eagle", batch_sizes=(1,), steps=2)
    counts = pd.read_csv(folder / "counts.csv").drop(columns=["region"])
    counts.to_csv(folder / "counts.csv", index=False)
    reseal(folder, "counts.csv")
    with pytest.raises(InputError, match=r"counts\.csv: region: missing column"):
        load_run(folder)


def test_first_format_setup_path_reads_the_same(tmp_path):
    """The runner first labelled a measured step's scheduler rows path "setup"."""
    new = load_run(write_run(tmp_path / "a", "eagle", batch_sizes=(8, 96), steps=3))
    old = load_run(
        write_run(tmp_path / "b", "eagle", batch_sizes=(8, 96), steps=3, legacy_setup_path=True)
    )
    totals = [tables.total_syncs_by_batch(r.counts)["per_step"].tolist() for r in (new, old)]
    assert totals[0] == totals[1]
    assert tables.blame_table(new.syncs, new.counts).equals(
        tables.blame_table(old.syncs, old.counts)
    )


def test_step_latency_has_measured_steps_only(runs):
    steps = tables.step_latency(load_run(runs["eagle"]).latency)
    per_cell = steps[steps["metric"] == "host"].groupby(["variant", "batch_size"]).size()
    assert (per_cell == 12).all()  # 12 measured steps; warm-up and set-up samples left out


def test_the_a_a_arm_is_labelled_apart_in_its_variants_place():
    df = pd.DataFrame(
        {
            "variant": ["before", "before"],
            "mirror": ["auto", "absent"],
            "case": ["", ""],
            "arm": ["aa", ""],
        }
    )
    labels = list(tables.with_variant_label(df)["label"])
    assert labels == ["before A/A (mirror=auto)", "before (mirror=absent)"]
    assert tables.label_parts(labels[0]) == ("before", "auto")
