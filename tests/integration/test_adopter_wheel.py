"""The sync ledger as a project that adopts it gets it: its wheel, built from this repository and
installed (not editable) beside an environment that holds only torch and pytest (`.venv/adopter`,
made by `make setup`). There the example project's suite (examples/tinyserve: a device fixture
written the usual way, budgets with `within`) passes with plain `pytest`, and a sync planted in
its package fails it, naming the line. A file the ledger reads at run time that the wheel does
not ship fails here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tinyserve"
# `make test` names it (relative to the repository); run by hand, the one `make setup` made is
# used when it is there
ADOPTER = REPO / (os.environ.get("ADOPTER_VENV") or ".venv/adopter")
MAX_INSTALL_BYTES = 5 * 2**20
ANCHOR = '    with region("cu_seqlens"):\n'
PLANT = "        int(seq_lens.max())  # planted\n"
# what an environment that holds torch and pytest has besides: their requirements, and the
# venv's own installers. Printed by the adopter's Python: the names left over.
FOREIGN = """
import importlib.metadata as m, re
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
dists = {norm(d.metadata["Name"]): d for d in m.distributions()}
seen, todo = set(), ["torch", "pytest"]
while todo:
    name = todo.pop()
    if name in dists and name not in seen:
        seen.add(name)
        reqs = [r for r in dists[name].requires or [] if "extra ==" not in r]
        todo += [norm(re.match(r"[A-Za-z0-9_.-]+", r)[0]) for r in reqs]
print(" ".join(sorted(set(dists) - seen - {"pip", "setuptools"})))
"""


def _run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None):
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _adopter_python() -> Path:
    python = ADOPTER / "bin" / "python"
    if not python.exists():
        if os.environ.get("ADOPTER_VENV"):
            pytest.fail(f"ADOPTER_VENV={ADOPTER}: no Python there; `make setup` makes it")
        pytest.skip(f"no adopter environment at {ADOPTER} (`make setup` makes it)")
    return python


def _build_wheel(tmp: Path) -> Path:
    """The ledger's wheel, built from a copy of its sources (a build writes beside them)."""
    src = tmp / "src"
    shutil.copytree(
        REPO / "syncledger",
        src,
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist"),
    )
    built = _run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "-w", tmp / "dist", src,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("syncledger-*.whl")
    return wheel


def _check_metadata(wheel: Path) -> None:
    """Import names: `syncledger` alone (never `harness` or `kernels`); requirements: torch."""
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist()}
        (info,) = [t for t in tops if t.endswith(".dist-info")]
        metadata = zf.read(f"{info}/METADATA").decode()
    assert tops - {info} == {"syncledger"}
    requires = re.findall(r"^Requires-Dist: ([A-Za-z0-9_.-]+)(.*)$", metadata, re.M)
    assert {name for name, rest in requires if "extra ==" not in rest} == {"torch"}


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _env(site: Path | None = None) -> dict[str, str]:
    """This process's environment without what points at the harness or its pytest run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    return env if site is None else {**env, "PYTHONPATH": str(site)}


def _pytest(python: Path, site: Path, project: Path) -> subprocess.CompletedProcess[str]:
    """Plain `pytest` in the project, as its developers run it (no option of the ledger)."""
    return _run(python, "-m", "pytest", "-p", "no:cacheprovider", cwd=project, env=_env(site))


def test_the_wheel_gates_an_adopting_project(tmp_path: Path) -> None:
    python = _adopter_python()
    foreign = _run(python, "-c", FOREIGN, cwd=tmp_path, env=_env())
    assert foreign.returncode == 0 and foreign.stdout.split() == [], foreign

    wheel = _build_wheel(tmp_path)
    _check_metadata(wheel)
    site = tmp_path / "site"
    installed = _run(
        python, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", site, wheel,
        cwd=tmp_path, env=_env(),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    assert _size(site) <= MAX_INSTALL_BYTES

    clean = tmp_path / "clean"
    shutil.copytree(EXAMPLE, clean)
    passed = _pytest(python, site, clean)
    assert passed.returncode == 0, passed.stdout
    assert re.search(r"\b6 passed\b", passed.stdout), passed.stdout
    assert "measured nothing" not in passed.stdout
    assert "sync ledger: 3 tests ran on the emulated device" in passed.stdout

    planted = tmp_path / "planted"
    shutil.copytree(EXAMPLE, planted)
    paging = planted / "tinyserve" / "paging.py"
    source = paging.read_text()
    assert source.count(ANCHOR) == 1
    paging.write_text(source.replace(ANCHOR, ANCHOR + PLANT))
    line = paging.read_text().splitlines().index(PLANT.rstrip("\n")) + 1
    failed = _pytest(python, site, planted)
    assert failed.returncode == 1, failed.stdout
    assert re.search(r"\b3 failed, 3 passed\b", failed.stdout), failed.stdout
    assert f"d2h_read int at tinyserve/paging.py:{line} in cu_seqlens" in failed.stdout
