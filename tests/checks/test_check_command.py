"""`python -m harness check`: every check is a registered command; `--all` (what `make
gpu-check` runs) runs each check of the GPU's verdict into OUT/NAME, also after one failed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from harness.checks import registry
from harness.cli import main

# the checks of the GPU's verdict, whoever registers them
VERDICT = {"backend", "serving", "sync", "programs", "programs-cost", "op-table", "op-table-emu",
           "lifecycle"}  # fmt: skip


def test_the_registered_checks_cover_every_gpu_verdict() -> None:
    checks = registry.load_checks()
    assert {c.name for c in checks.values() if c.in_all} == VERDICT
    assert {"emulated-cost", "record-cost"} <= set(checks)


def test_all_runs_every_verdict_check_into_its_folder(monkeypatch, tmp_path, capsys) -> None:
    seen: dict[str, list[Path]] = {}
    checks = registry.load_checks()
    for name, chk in list(checks.items()):

        def fake(args, name=name) -> int:
            seen[name] = [args.out, getattr(args, "gpu", None)]
            return 1 if name == "serving" else 0

        monkeypatch.setitem(checks, name, dataclasses.replace(chk, run=fake))
    monkeypatch.setattr("syncledger.platform.cuda_present", lambda: True)
    assert main(["check", "--all", str(tmp_path)]) == 1
    assert set(seen) == VERDICT
    assert all(out == tmp_path / name for name, (out, _) in seen.items())
    assert seen["op-table-emu"][1] == tmp_path / "op-table"  # reads what op-table wrote
    assert "checks failed: serving" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv", [["check"], ["check", "nope"], ["check", "sync", "--all", "x"]], ids=str
)
def test_a_bad_check_command_is_one_line_and_exit_2(argv, capsys) -> None:
    assert main(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_check_that_needs_cuda_is_refused_before_writing(tmp_path, capsys) -> None:
    out = tmp_path / "serving"
    assert main(["check", "serving", "--out", str(out)]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err and not out.exists()
