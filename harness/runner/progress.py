"""Progress of a long pass on stderr: a tqdm bar on a terminal, plain periodic lines otherwise
(CI logs), e.g. `nonspec count 120/480 steps, 25 s`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

LINE_EVERY_S = 10.0  # plain lines: at most one per this many seconds, and one at the end


class _Lines:
    """A plain line every LINE_EVERY_S seconds of progress, and a last one when done."""

    def __init__(self, total: int, name: str, out: TextIO, clock: Callable[[], float]):
        self.total, self.name, self.out, self.clock = total, name, out, clock
        self.n = 0
        self.t0 = self.last = clock()

    def update(self, n: int) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= LINE_EVERY_S:
            self.last = now
            self._line(now)

    def close(self) -> None:
        if self.n:
            self._line(self.clock(), " (done)" if self.n >= self.total else " (stopped)")

    def _line(self, now: float, tail: str = "") -> None:
        took = now - self.t0
        print(f"{self.name} {self.n}/{self.total} steps, {took:.0f} s{tail}", file=self.out)
        self.out.flush()


class Progress:
    """Counts scheduler steps over all cells of a pass.

    `enabled=None`: a bar on a terminal, plain lines when stderr is not one; False: silent."""

    def __init__(
        self,
        total: int,
        name: str,
        enabled: bool | None = None,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        out = out or sys.stderr
        self._bar = self._lines = None
        if enabled is None and not out.isatty():
            self._lines = _Lines(total, name, out, clock)
        elif enabled is not False:
            self._bar = tqdm(total=total, desc=name, unit="step", file=out, leave=False)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._lines is not None:
            self._lines.close()

    def describe(self, text: str) -> None:
        """What runs now (shown on the bar; plain lines keep the pass's name)."""
        if self._bar is not None:
            self._bar.set_description_str(text, refresh=False)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)
        if self._lines is not None:
            self._lines.update(n)

    def skip(self, n: int) -> None:
        """Steps a failed cell will not run still count as done."""
        if n > 0:
            self.advance(n)
