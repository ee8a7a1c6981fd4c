"""Checks each upstream sync site against the fidelity table's statement for it."""

from __future__ import annotations

from harness.fidelity import Table

_ROOT = "sglang/srt/"


def _parts(location: str) -> tuple[str, int]:
    path, _, line = location.rpartition(":")
    return path.split(_ROOT, 1)[-1], int(line)


def named_by_table(
    location: str, function: str, kind: str, table: Table, variant: str, *, exact: bool
) -> bool:
    """Whether a row of the table names this sync: its file, and its line at `variant`'s
    commit (`exact`: the file is that commit's) or else its function, with the same effect."""
    path, line = _parts(location)
    for row in table.rows:
        up = row.upstream
        at = up[variant]
        if not path.endswith(up["file"].split()[0]) or at["effect"] != kind:
            continue
        if (at["line"] == line) if exact else (function in up["function"]):
            return True
    return False
