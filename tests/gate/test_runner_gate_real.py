"""The gate on the real backend and serving world: a planted `.item()` in a backend path fails
it (exit 1) and the report names the planted line; without it, it passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.backend import DeepseekV4AttnBackend
from harness.cli import main
from tests.support.tiny import tiny_scenario

TINY = tiny_scenario(("after", "dropped"), count=3)


def planted_d2h(batch) -> None:
    batch.seq_lens.max().item()  # PLANTED SYNC


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    base = tmp_path / "baselines"
    args = ["--baselines", str(base), "--scenarios", str(path), "--no-progress", "--device", "emu"]
    assert main(["baseline", *args]) == 0
    data = json.loads((base / "tiny.json").read_text())
    assert set(data["outcomes"].values()) == {"ok"}, data["outcomes"]  # not vacuous
    return args


def test_gate_passes_then_fails_on_planted_sync(tiny, monkeypatch, capsys):
    assert main(["gate", *tiny]) == 0
    original = DeepseekV4AttnBackend.init_forward_metadata_out_graph

    def with_extra_sync(self, batch, in_capture=False):
        planted_d2h(batch)
        return original(self, batch, in_capture)

    monkeypatch.setattr(DeepseekV4AttnBackend, "init_forward_metadata_out_graph", with_extra_sync)
    capsys.readouterr()
    assert main(["gate", *tiny]) == 1
    out = capsys.readouterr().out
    line = next(
        i for i, t in enumerate(Path(__file__).read_text().splitlines(), 1) if "# PLANTED SYNC" in t
    )
    assert f"test_runner_gate_real.py:{line} in planted_d2h" in out
    assert "d2h_read item" in out and "path=graph" in out and "gate FAILED" in out


def test_gate_missing_baseline_exit_2(tmp_path, capsys):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    rc = main(
        ["gate", "--baselines", str(tmp_path / "none"), "--scenarios", str(path), "--device", "emu"]
    )
    assert rc == 2
    assert "missing baseline" in capsys.readouterr().err
