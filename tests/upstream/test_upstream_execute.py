"""Upstream sglang's own metadata code, run beside the model: the set-up releases agree with
the model on every cell (syncs, exceptions, values), their sites are the fidelity table's,
and planted changes to the model's sync behaviour fail the check, each on its own cells."""

from __future__ import annotations

import re

import pytest

from harness.backend.backend import DeepseekV4AttnBackend
from harness.backend.variants import DroppedPolicy
from harness.cli import main
from harness.serving.modes import SpecV2
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
    assert agree == cells >= 80 and named == sites > 0, out[-400:]
    assert "**differ**" not in out  # values computed on the device equal on every cell
    for cell in ("relay decode", "sparse-prefill extend c0+c4+c128, mirror present"):
        assert f"| {cell} |" in out


def test_planted_syncs_in_the_model_fail_the_check_on_their_cells(capsys, monkeypatch) -> None:
    # a9cf5e68 skips the capture's `.cpu()` when it needs no mirror: plant it back
    monkeypatch.setattr(DroppedPolicy, "capture_mirror_may_d2h", lambda self, s, n: s.cpu())
    # the spec-v2 relay pulls the mirror only when the backends want it: plant that it always does
    monkeypatch.setattr(
        SpecV2, "decode_mirror", lambda self, st, r, n, s: st.relay.pull_mirror_syncs(s, r)
    )
    # the sparse prefill sizes its workspace once per forward: plant a second read
    sizing = DeepseekV4AttnBackend.sparse_prefill_workspace_len_d2h

    def sized_twice(self, batch):
        sizing(self, batch)
        return sizing(self, batch)

    monkeypatch.setattr(DeepseekV4AttnBackend, "sparse_prefill_workspace_len_d2h", sized_twice)
    release = next(r for r in DEFAULT_RELEASES if r.variant == "dropped")
    tree = str(INSTALLED / release.version)
    assert main(["fidelity", "--execute", "--upstream-tree", tree, "--compare-to", "dropped"]) == 1
    out = capsys.readouterr().out
    agree, cells, _, _ = _verdict(out)
    assert agree < cells
    unexplained = set(re.findall(r"differs, unexplained: .*?: (.+)", out))
    assert {
        "capture decode, mirror present",
        "relay decode",
        "sparse-prefill extend c0+c4+c128, mirror present",
    } <= unexplained, unexplained


def test_a_path_without_sglang_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    argv = ["fidelity", "--execute", "--upstream-tree", str(tmp_path), "--compare-to", "after"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0] and "sglang/srt" in err[0]
