"""Upstream sglang's own metadata code, run beside the model: the set-up releases agree with
the model on every cell (syncs, exceptions, metadata values), their sites are the fidelity
table's, and a planted change to the model's sync behaviour fails the check."""

from __future__ import annotations

import re

import pytest

from harness.backend.variants import DroppedPolicy
from harness.cli import main
from harness.upstream.releases import DEFAULT_RELEASES, INSTALLED

pytestmark = pytest.mark.slow
VERDICT = re.compile(r"upstream executed: (\d+) of (\d+) cells agree; (\d+) of (\d+) sites")


def _verdict(out: str) -> tuple[int, ...]:
    (found,) = VERDICT.findall(out)
    return tuple(map(int, found))


def test_the_set_up_releases_agree_with_the_model_on_every_cell(capsys) -> None:
    assert main(["fidelity", "--execute", "--device", "emu"]) == 0
    out = capsys.readouterr().out
    agree, cells, named, sites = _verdict(out)
    assert agree == cells >= 60 and named == sites > 0, out[-400:]
    assert "**differ**" not in out  # torch-computed metadata equal on every cell


def test_a_planted_sync_in_the_model_fails_the_check(capsys, monkeypatch) -> None:
    # a9cf5e68 skips the capture's `.cpu()` when it needs no mirror; plant it back
    monkeypatch.setattr(DroppedPolicy, "capture_mirror_may_d2h", lambda self, s, n: s.cpu())
    release = next(r for r in DEFAULT_RELEASES if r.variant == "dropped")
    tree = str(INSTALLED / release.version)
    assert main(["fidelity", "--execute", "--upstream-tree", tree, "--compare-to", "dropped"]) == 1
    out = capsys.readouterr().out
    agree, cells, _, _ = _verdict(out)
    assert agree < cells
    assert "differs, unexplained: " in out and "capture decode, mirror present" in out


def test_a_path_without_sglang_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    argv = ["fidelity", "--execute", "--upstream-tree", str(tmp_path), "--compare-to", "after"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0] and "sglang/srt" in err[0]
