"""A progress bar on stderr for long runs (tqdm), silent when stderr is not a terminal."""

from __future__ import annotations

import sys

from tqdm import tqdm


class Progress:
    """Counts scheduler steps over all cells of a pass. `enabled=None`: only on a terminal."""

    def __init__(self, total: int, desc: str, enabled: bool | None = None):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self._bar = tqdm(
            total=total, desc=desc, unit="step", file=sys.stderr, disable=not enabled, leave=False
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.close()

    def describe(self, text: str) -> None:
        self._bar.set_description_str(text, refresh=False)

    def advance(self, n: int = 1) -> None:
        self._bar.update(n)

    def skip(self, n: int) -> None:
        """Steps a failed cell will not run still count as done for the bar."""
        if n > 0:
            self._bar.update(n)
