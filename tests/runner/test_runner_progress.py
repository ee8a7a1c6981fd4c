"""Progress on long runs: plain periodic lines where output is not a terminal (CI logs), a bar
on a terminal, nothing when switched off."""

from __future__ import annotations

import io

from harness.runner.progress import Progress


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal():
    out, clock = io.StringIO(), _Clock()
    with Progress(480, "nonspec count", out=out, clock=clock) as prog:
        prog.describe("nonspec count after/mirror=auto/bs=8")
        for _ in range(120):
            clock.t += 0.2
            prog.advance()
        prog.skip(360)  # a failed cell's steps
    lines = out.getvalue().splitlines()
    assert lines == [
        "nonspec count 50/480 steps, 10 s",
        "nonspec count 100/480 steps, 20 s",
        "nonspec count 480/480 steps, 24 s (done)",
    ]


def test_a_short_pass_prints_one_line_and_off_prints_none():
    out = io.StringIO()
    with Progress(3, "eagle time", out=out, clock=_Clock()) as prog:
        prog.advance(3)
    assert out.getvalue() == "eagle time 3/3 steps, 0 s (done)\n"
    quiet = io.StringIO()
    with Progress(3, "eagle time", enabled=False, out=quiet) as prog:
        prog.advance(3)
    assert quiet.getvalue() == ""


def test_a_bar_on_a_terminal():
    out = _Terminal()
    with Progress(10, "eagle time", out=out, clock=_Clock()) as prog:
        prog.advance(10)
    text = out.getvalue()
    assert text.startswith("\reagle time:") and "/10 [" in text and "steps, " not in text
