"""The README and the pages under docs/ work as written: every Python snippet runs, every
scenario snippet validates, every `python -m harness` command, `make` target and `--set` key
they name exists, and every relative link (and its #anchor) resolves."""

from __future__ import annotations

import re
import sys
import tempfile
import types
from pathlib import Path

import pytest

from harness import registry
from harness.commands import load_commands
from harness.errors import InputError
from harness.scenario import load_scenario
from harness.scenario.schema import schema_type_at
from harness.scenario.validate import Source

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = [
    *PAGES,
    *sorted((REPO / "results").glob("*/README.md")),
    REPO / "examples/tinyserve/README.md",
    REPO / "syncledger/README.md",
]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def snippets(lang: str) -> list[tuple[str, str]]:
    """(page, code) of every fenced block in `lang`."""
    return [(_rel(p), m[2]) for p in PAGES for m in FENCE.finditer(p.read_text()) if m[1] == lang]


def test_the_ledger_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """On this machine: CUDA, or without one, the emulated device."""
    ((page, code),) = [(p, c) for p, c in snippets("python") if p == "docs/ledger.md"]
    exec(compile(code, page, "exec"), {"__name__": "__docs__"})
    table = capsys.readouterr().out
    assert table.startswith("1 syncs at 1 locations")
    assert "d2h_read" in table and "step/metadata" in table and "docs/ledger.md:" in table


def test_the_ledger_readme_example_prints_what_it_shows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """syncledger/README.md (also the wheel's description): its first example, as `example.py`
    in the working folder, prints the table shown below it."""
    text = (REPO / "syncledger" / "README.md").read_text()
    blocks = list(FENCE.finditer(text))
    first = next(i for i, m in enumerate(blocks) if m[1] == "python")
    code, shown = blocks[first][2], blocks[first + 1][2]
    exec(compile(code, "example.py", "exec"), {"__name__": "__readme__"})
    # run as a script it has no callers; here this test calls it
    out = capsys.readouterr().out.splitlines(keepends=True)
    assert "".join(ln for ln in out if not ln.startswith("        called from ")) == shown


def test_every_other_python_snippet_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    """A snippet may register a world, and write where `tempfile` says: both are this test's."""
    others = [(p, c) for p, c in snippets("python") if p != "docs/ledger.md"]
    assert others, "no python snippet outside the ledger's page"
    monkeypatch.setattr(registry, "_WORLDS", dict(registry.worlds()))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for page, code in others:
        module = types.ModuleType("docs_snippet")  # a module of its own: dataclasses look it up
        monkeypatch.setitem(sys.modules, module.__name__, module)
        exec(compile(code, page, "exec"), module.__dict__)
    assert "reads=2" in capsys.readouterr().out  # docs/extending.md's world ran its cells


def test_every_scenario_snippet_validates(tmp_path: Path) -> None:
    shown = [(p, c) for p, c in snippets("yaml") if c.startswith("name:")]
    assert shown
    for page, code in shown:
        path = tmp_path / "shown.yaml"
        path.write_text(code)
        name = code.split("\n", 1)[0].split(":", 1)[1].strip()
        committed = load_scenario(name).effective()
        assert load_scenario(str(path)).effective() == committed, page


def _words(pattern: str) -> set[tuple[str, str]]:
    return {(_rel(p), m) for p in PAGES for m in re.findall(pattern, p.read_text())}


def test_every_command_target_and_key_named_exists() -> None:
    commands = set(load_commands())
    for page, name in _words(r"python -m harness (\w[\w-]*)"):
        assert name in commands, f"{page}: python -m harness {name}"
    targets = set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M))
    written = _words(r"`make ([a-z][\w-]*)") | {
        (page, name)
        for page, code in snippets("bash")
        for name in re.findall(r"^make ([\w-]+)", code, re.M)
    }
    for page, name in written:
        assert name in targets, f"{page}: make {name}"
    for page, key in _words(r"--set ([\w.]+)="):
        try:
            schema_type_at(key, Source(page))
        except InputError as exc:
            pytest.fail(f"{page}: --set {key}: {exc}")


def test_the_reference_says_how_to_run_the_commands_on_its_first_screen() -> None:
    """`python -m harness` works only in the set-up environment: its first screen says how."""
    venv = re.search(r"^VENV := (\S+)$", (REPO / "Makefile").read_text(), re.M)[1]
    first = "\n".join((REPO / "docs" / "README.md").read_text().splitlines()[:25])
    assert f"source {venv}/bin/activate" in first and f"{venv}/bin/python -m harness" in first


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", LINKED, ids=_rel)
def test_every_relative_link_resolves(page: Path) -> None:
    text = FENCE.sub("", page.read_text())
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{_rel(page)}: {target}"
        if anchor:
            assert anchor in _anchors(dest), f"{_rel(page)}: {target}: no such heading"
