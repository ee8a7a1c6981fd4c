"""`syncledger SCRIPT` (`python -m syncledger`) runs any script under the ledger."""

from __future__ import annotations

import json
import os
import sys
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


def test_a_forked_child_that_returns_is_merged_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The script's child returns from the script into the command, and from it into this test:
    there it leaves at once, as its script would end. It printed nothing; the parent's one
    table holds both syncs. (fd capture: the child writes where the parent does.)"""
    script = tmp_path / "forks.py"
    script.write_text(
        "import os, torch\n"
        "x = torch.arange(4, device='cuda')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    int(x.sum())\n"
        "else:\n"
        "    os.waitpid(pid, 0)\n"
        "    x.tolist()\n"
    )
    parent = os.getpid()
    rc = main(["--device", "emu", str(script)])
    if os.getpid() != parent:
        sys.stdout.flush()
        os._exit(rc)
    assert rc == 0
    out = capfd.readouterr().out
    assert out.count("syncs at") == 1
    assert out.startswith("2 syncs at 2 locations\n1 forked child processes followed\n")


def test_threads_still_running_at_the_end_are_waited_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "threads.py"
    script.write_text(
        "import threading, time, torch\n"
        "x = torch.arange(4, device='cuda')\n"
        "def work(n):\n"
        "    for _ in range(n):\n"
        "        time.sleep(0.02)\n"
        "        int(x.sum())\n"
        "threading.Thread(target=work, args=(5,), name='worker').start()\n"
        "threading.Thread(target=time.sleep, args=(1,), name='reaper', daemon=True).start()\n"
    )
    assert main(["--device", "emu", "--json", str(tmp_path / "t.json"), str(script)]) == 0
    err = capsys.readouterr().err
    assert json.loads((tmp_path / "t.json").read_text())["total"] == 5  # the worker's all
    assert "note: 1 daemon thread(s) of the script still running at its end (reaper)" in err


def test_json_is_where_it_was_asked_whatever_the_script_changes_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "moves.py"
    script.write_text(
        "import os, torch\n"
        "os.mkdir('elsewhere')\n"
        "os.chdir('elsewhere')\n"
        "int(torch.arange(3, device='cuda').sum())\n"
    )
    assert main(["--device", "emu", "--json", "syncs.json", str(script)]) == 0
    assert json.loads((tmp_path / "syncs.json").read_text())["total"] == 1
    assert not (tmp_path / "elsewhere" / "syncs.json").exists()


def test_what_the_emulated_device_cannot_run_is_one_line_at_the_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _run_script(tmp_path, capsys, "y = x + torch.arange(4)\n")
    assert rc == 1
    (line,) = [ln for ln in err.splitlines() if ln.startswith(f"{tmp_path / 'user_code.py'}:4: ")]
    assert "expected all tensors on the same device" in line
    assert "Traceback" not in err
