"""`python -m harness bench` end to end on the real world (emulated device, tiny sizes)."""

from __future__ import annotations

import csv
import json

from harness.cli import main
from harness.results.run_folder import is_complete

TINY_SPEC = """\
name: tinyspec
seed: 3
serving:
  model: flash
  serving_mode: specv2
  batch_sizes: [4]
  context_len: 1024
  cuda_graph_max_bs: 8
  prefill_every: 3
  variants: [before, after, dropped]
  mirror: [auto, absent]
  spec: {steps: 3, topk: 1, draft_tokens: 4, accept_mean: 2.8}
steps: {warmup: 1, count: 3, time: 2, time_emu: 2}
"""


def _rows(folder, name):
    with open(folder / f"{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_bench_end_to_end(tmp_path, capsys):
    scen = tmp_path / "tinyspec.yaml"
    scen.write_text(TINY_SPEC)
    out = tmp_path / "runs"
    rc = main(
        ["bench", "--scenario", str(scen), "--device", "emu", "--out", str(out), "--no-progress"]
    )
    assert rc == 0
    stdout = capsys.readouterr().out
    assert "Syncs per measured step" in stdout and "run folder:" in stdout
    (folder,) = list((out / "tinyspec").iterdir())
    assert is_complete(folder)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["device_kind"] == "emu" and meta["seed"] == 3

    outcomes = _rows(folder, "outcomes")
    # variants x mirrors x passes, and the time pass's A/A arm (a second `before` per mirror)
    assert len(outcomes) == 3 * 2 * 2 + 2
    failed = {
        (r["variant"], r["pass"]): (r["exception"], r["location"].split(":")[0])
        for r in outcomes
        if r["status"] != "ok"
    }
    # upstream without the relayed mirror: `before` asserts it in the draft pass, `after` fails
    # in the worker, which reads a `max_context_len` the backend lacks before a9cf5e68
    assert failed == {
        (v, p): exc
        for v, exc in (
            ("before", ("AssertionError", "harness/backend/variants.py")),
            ("after", ("AttributeError", "harness/serving/modes.py")),
        )
        for p in ("count", "time")
    }
    assert all(r["mirror"] == "absent" for r in outcomes if r["status"] != "ok")

    counts = _rows(folder, "counts")
    measured = [r for r in counts if r["path"] in ("graph", "eager")]
    assert measured and any(r["syncs"] == "0" for r in measured)
    assert {r["path"] for r in counts} >= {"capture", "warmup"}
    # the relay's stream synchronize when before/after ask for the mirror
    syncs = _rows(folder, "syncs")
    assert any(
        s["variant"] == "after" and s["mirror"] == "auto" and s["region"] == "step/scheduler/mirror"
        for s in syncs
    )

    lat = _rows(folder, "latency")
    assert {r["device"] for r in lat} == {"emu"} and {r["metric"] for r in lat} == {"host"}
    assert any(r["region"] == "iteration" for r in lat)
    assert any(r["region"].startswith("step/metadata/") for r in lat)
