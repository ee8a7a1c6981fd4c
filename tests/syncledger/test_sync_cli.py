"""`syncledger SCRIPT` (`python -m syncledger`) runs any script under the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from syncledger.cli import main


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
    rc = main(["--device", "emu", "--json", str(out_json), "--", str(script), "--flag"])
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
    assert main(["--device", "emu", "--", "no/such/script.py"]) == 2
    assert "no/such/script.py: no such script" in capsys.readouterr().err


def _run_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> tuple[int, str, str]:
    script = tmp_path / "user_code.py"
    script.write_text(
        "import sys, torch\nx = torch.arange(4, device='cuda')\nn = int(x.sum())\n" + body
    )
    rc = main(["--device", "emu", "--", str(script)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_script_exception_is_its_own_traceback_exit_1_and_syncs_still_print(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _run_script(tmp_path, capsys, "def f():\n    raise ValueError('boom')\nf()\n")
    assert rc == 1
    assert "Traceback (most recent call last)" in err and "ValueError: boom" in err
    assert 'user_code.py", line 6, in <module>' in err and "runpy" not in err
    assert "--device" not in err
    assert out.startswith("1 syncs at 1 locations")


@pytest.mark.parametrize(
    "body,code,message",
    [
        ("sys.exit('no lengths given')\n", 1, "no lengths given"),
        ("sys.exit(3)\n", 3, None),
        ("sys.exit()\n", 0, None),
        ("raise KeyboardInterrupt\n", 130, "interrupted (Ctrl-C)"),
    ],
)
def test_script_exit_keeps_its_code_and_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, code: int, message: str | None
) -> None:
    rc, out, err = _run_script(tmp_path, capsys, body)
    assert rc == code
    if message is not None:
        assert message in err.splitlines()
    assert out.startswith("1 syncs at 1 locations")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_asked_without_cuda_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "user_code.py"
    script.write_text("raise ValueError('never run')\n")
    assert main(["--device", "cuda", "--", str(script)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --device:") and "never run" not in err
