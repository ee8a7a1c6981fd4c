"""Recording keeps what identifies a sync's site (code objects and instructions) and works out
files, lines and functions when the ledger is read: the same answers as reading the frames at
the moment, and no frame (nor what it holds) kept alive."""

from __future__ import annotations

import sys
import traceback
import weakref
from pathlib import Path

from syncledger import SyncKind, SyncLedger, max_syncs, record_sync
from syncledger.events import capture_site, resolve_site
from syncledger.failures import SyncBudgetExceeded


class _Held:
    """Something a frame holds (a tensor, in a real program)."""


def _sync_here() -> tuple[object, list[traceback.FrameSummary]]:
    # the sync and the stdlib's reading of the frames on one line: the same moment
    return record_sync(SyncKind.EXPLICIT, "probe"), traceback.extract_stack()


def _called_over_lines(n: int) -> tuple[object, list[traceback.FrameSummary]]:
    for _ in range(n):  # a loop, and a call whose arguments span lines
        got = _pass_on(
            n,
            _sync_here,
        )
    return got


def _pass_on(_n: int, fn: object) -> tuple[object, list[traceback.FrameSummary]]:
    return fn()  # type: ignore[operator]


def test_a_site_resolves_to_the_lines_the_frames_were_at() -> None:
    with SyncLedger() as led:
        event, frames = _called_over_lines(2)
    assert event is led.events[-1]
    mine = [(f.lineno, f.name) for f in reversed(frames) if f.filename == __file__]
    here = Path(__file__).name
    stack = [(line, fn) for file, line, fn in led.events[-1].stack if Path(file).name == here]
    assert stack == mine and len(mine) == 4
    assert led.events[-1].location.endswith(f":{mine[0][0]}")
    assert led.events[-1].function == "_sync_here"


def _sync_holding(held: _Held) -> None:
    local = held  # noqa: F841  # the frame holds it until it returns
    record_sync(SyncKind.EXPLICIT, "probe")


def test_recording_keeps_no_frame_alive() -> None:
    held = _Held()
    gone = weakref.ref(held)
    with SyncLedger() as led:
        _sync_holding(held)
    del held
    assert gone() is None  # nothing of the frame outlived its call, though the event does
    assert led.events[0].function == "_sync_holding"


def test_code_made_at_run_time_is_judged_by_its_own_file() -> None:
    """A frame of a module whose file is not machinery costs a look at its code; code run
    with globals that have no file (generated) is kept or passed over by its code's file."""
    generated = compile("def gen(f):\n    return f(1)\n", "generated_by_a_tool.py", "exec")
    namespace: dict[str, object] = {}
    exec(generated, namespace)
    site = namespace["gen"](capture_site)  # type: ignore[operator]
    files = [f for f, _, _ in resolve_site(site)]
    assert files[:2] == ["generated_by_a_tool.py", files[1]] and files[1].endswith(".py")
    exec(compile("def gen2(f):\n    return f(1)\n", "<string>", "exec"), namespace)
    site = namespace["gen2"](capture_site)  # type: ignore[operator]
    assert "<string>" not in [f for f, _, _ in resolve_site(site)]


def test_a_budget_read_late_names_the_offending_stack() -> None:
    def offends() -> None:
        record_sync(SyncKind.EXPLICIT, "probe")

    try:
        with max_syncs(0):
            offends()
    except SyncBudgetExceeded as exc:
        text = str(exc)
    else:
        raise AssertionError("the budget did not fail")
    caller = sys._getframe().f_code.co_name
    assert "in offends" in text and f"in {caller}" in text
