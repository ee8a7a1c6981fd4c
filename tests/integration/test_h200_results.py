"""The committed GPU results say which commit they measured: each folder's README names it
per sub-folder (a table), and every meta.json under it records the same `measured_commit`
(its `git_commit` is the GPU machine's checkout, which the README explains)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p.parent for p in (REPO / "results").glob("h[12]00*/README.md"))
ROW = re.compile(r"^\| (?P<paths>`[^|]+`) \| (?P<commit>[0-9a-f]{7,40}) \|$")


def measured_commits(readme: Path) -> dict[str, str]:
    """Sub-folder -> the commit the README's table names for it."""
    out = {}
    for line in readme.read_text().splitlines():
        m = ROW.match(line.strip())
        if m:
            for path in re.findall(r"`([^`]+)`", m["paths"]):
                out[path.rstrip("/")] = m["commit"]
    return out


def test_there_are_gpu_results_to_check() -> None:
    assert [f.name for f in FOLDERS] == ["h100", "h200", "h200x2"]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_every_meta_json_records_the_commit_its_readme_names(folder: Path) -> None:
    named = measured_commits(folder / "README.md")
    assert named, "the README names no measured commit"
    metas = sorted(folder.rglob("meta.json"))
    recorded = [m for m in metas if "git_commit" in json.loads(m.read_text())]
    assert recorded
    for meta in recorded:
        rel = meta.relative_to(folder).as_posix()
        owners = [p for p in named if rel.startswith(f"{p}/")]
        assert len(owners) == 1, f"{rel}: the README names no measured commit for it"
        data = json.loads(meta.read_text())
        assert data["measured_commit"].startswith(named[owners[0]]), rel
        assert len(data["measured_commit"]) == 40, rel
    covered = {p for p in named if any(m.relative_to(folder).as_posix().startswith(f"{p}/")
                                       for m in recorded)}  # fmt: skip
    assert covered == set(named), "a README row names a folder without a meta.json"
