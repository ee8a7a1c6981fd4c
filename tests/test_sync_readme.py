"""The README's library example works as written (on this machine: CUDA, or without one, the
emulated device)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## The sync ledger on your own code"


def _example() -> str:
    text = README.read_text()
    section = text[text.index(SECTION) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, f"no python example under {SECTION!r}"
    return match.group(1)


def test_readme_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(_example(), str(README), "exec"), {"__name__": "__readme__"})
    table = capsys.readouterr().out
    assert table.startswith("1 syncs at 1 locations")
    assert "d2h_read" in table and "step/metadata" in table and "README.md:" in table
