"""DP ranks and their launcher: ranks die with the launcher whatever kills it, and a launcher
stopped by SIGTERM says so, exit 143, with the run folder marked stopped by the user's SIGTERM.

Each of the first two starts 2 real ranks (emulated device) in a launcher of its own, which
it then kills: 5 to 7 s each on 2 cores, most of it the launcher's and its fork server's
start-up. The last checks a rank's own test of its launcher, in small processes of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.results.run_folder import INCOMPLETE_MARKER
from tests.integration.test_dp_run import SETTINGS
from tests.support.dp_fakes import BLOCKED_FLAG
from tests.support.overrides import overridden

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _launcher(code: str, tmp_path: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        BLOCKED_FLAG: str(tmp_path / "blocked"),
        "TMPDIR": str(tmp_path),  # what a killed launcher cannot remove stays with the test
    }
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(root: Path, pattern: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not list(root.glob(pattern)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{root / pattern} never appeared"
        time.sleep(0.1)


def _children(pid: int) -> dict[int, bytes]:
    """The processes whose parent is `pid`, with their command lines."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat, cmdline = (d / "stat").read_text(), (d / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out[int(d.name)] = cmdline
    return out


def _fork_server_and_ranks(pid: int) -> tuple[int, list[int]]:
    """The launcher `pid`'s fork server and the rank processes it forked."""
    (server,) = [c for c, cmd in _children(pid).items() if b"forkserver" in cmd]
    return server, list(_children(server))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead; whoever adopted it has not reaped it yet


def test_ranks_blocked_in_collectives_die_with_a_sigkilled_launcher(tmp_path):
    """Rank 0 waits in a barrier, rank 1 in the exchange, until dp.timeout_s (60 s): torch's
    own parent-death signal (SIGINT) cannot reach them there; a SIGKILL does. The fork server
    that forked them goes too (they hold its pipe from the launcher open)."""
    code = f"""
from pathlib import Path
from tests.support.dp_fakes import blocking_builder
from harness.dp.job import RankJob
from harness.dp.launch import launch_local
from harness.scenario import load_scenario
loaded = load_scenario("dp_attention", {overridden(SETTINGS, "dp.timeout_s=60", "dp.streams=[]")!r})
launch_local(RankJob(loaded, "emu", "count", Path("runs"), "run", builder=blocking_builder))
"""
    proc = _launcher(code, tmp_path)
    procs: list[int] = []
    try:
        _wait_for(tmp_path, "blocked", proc)
        server, ranks = _fork_server_and_ranks(proc.pid)
        assert len(ranks) == 2
        procs = [server, *ranks]
        time.sleep(0.5)  # rank 0 is inside the barrier now
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in procs if _alive(p)], (
            "the fork server or ranks outlived their launcher"
        )
    finally:
        proc.kill()
        for p in procs:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def test_sigterm_to_the_launcher_is_exit_143_and_the_folder_says_so(tmp_path):
    argv = ["bench", "--scenario", "dp_attention", "--device", "emu", "--out", "runs"]
    argv += [a for s in overridden(SETTINGS, "steps.count=100000") for a in ("--set", s)]
    code = f"import sys; from harness.cli import main; sys.exit(main({argv!r}))"
    proc = _launcher(code, tmp_path)
    try:
        _wait_for(tmp_path, "runs/dp_attention/*/meta.json", proc)
        time.sleep(1.0)  # the ranks are in their cells
        proc.send_signal(signal.SIGTERM)
        _stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    (folder,) = (tmp_path / "runs" / "dp_attention").iterdir()
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert (
        last == f"terminated (SIGTERM): run folder left incomplete: runs/dp_attention/{folder.name}"
    )
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["complete"] is False and meta["stopped"] == "terminated (SIGTERM)"
    assert "terminated (SIGTERM)" in (folder / INCOMPLETE_MARKER).read_text()
    outcomes = pd.read_csv(folder / "outcomes.csv", keep_default_na=False)
    stopped = outcomes[outcomes["exception"] == "RankStopped"]
    assert len(stopped) and set(stopped["message"]) == {"stopped by SIGTERM"}
    assert "another rank failed" not in stderr


@pytest.mark.parametrize(
    ("launcher", "code"),
    # the launcher is the parent (spawn), or the parent's parent (the fork server's rank), or gone
    [("os.getppid()", 0), ("parent_of(os.getppid())", 0), ("1 << 22", 128 + signal.SIGKILL)],
)
def test_a_rank_whose_launcher_is_gone_exits_at_once(launcher, code):
    script = (
        "import os, sys\n"
        "from harness.dp.lifeline import die_with_parent\n"
        "def parent_of(pid):\n"
        "    return int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        f"sys.exit(0 if die_with_parent({launcher}) else 1)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=30)
    assert done.returncode == code, done.stderr
