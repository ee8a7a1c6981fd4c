"""`python -m harness syncs` runs any script under the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main


def test_syncs_command_lists_script_syncs_by_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "user_code.py"
    script.write_text(
        "import sys, torch\n"
        "x = torch.arange(10, device='cuda')\n"
        "for _ in range(3):\n"
        "    n = int(x.sum())\n"
        "print(sys.argv[1:], x[x > 5].shape)\n"
    )
    out_json = tmp_path / "syncs.json"
    rc = main(["syncs", "--device", "emu", "--json", str(out_json), "--", str(script), "--flag"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "['--flag']" in text
    assert "4 syncs at 2 locations" in text
    data = json.loads(out_json.read_text())
    top = data["locations"][0]
    assert (top["count"], top["kind"], top["op"]) == (3, "d2h_read", "int")
    assert top["location"].endswith("user_code.py:4")
    assert all("harness/" not in frame for frame in top["stack"])


def test_syncs_command_missing_script_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["syncs", "--device", "emu", "--", "no/such/script.py"]) == 2
    assert "no/such/script.py: no such script" in capsys.readouterr().err
