"""`--set` arguments for tests that vary a shared list of them: a key may be set once."""

from __future__ import annotations


def overridden(settings: list[str], *changes: str) -> list[str]:
    """`settings` with `changes` in place of the settings of the same keys."""
    keys = {c.split("=", 1)[0] for c in changes}
    return [s for s in settings if s.split("=", 1)[0] not in keys] + list(changes)
