"""Where upstream trees come from: releases (installed at set-up, or fetched on demand into the
same place), or a checkout on disk."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError

REPO = Path(__file__).resolve().parents[2]
# releases' files (pip install --no-deps --target), one folder per version: `make setup` puts
# the default releases here, and a release asked for is fetched here once
INSTALLED = REPO / ".venv" / "upstream"
FIRST_DSV4 = "0.5.14"  # the first release with the DeepSeek-V4 backend
BACKEND_FILE = "layers/attention/deepseek_v4_backend.py"


@dataclass(frozen=True)
class Release:
    version: str
    variant: str  # the model variant it is run against
    # its files (under sglang/srt/) byte for byte the variant's commit's: the fidelity table's
    # line numbers name their sites (elsewhere sites are checked by function)
    same_files: tuple[str, ...] = ()


# 0.5.15.post1 ships a36c8731's backend file unchanged; 0.5.16 is the first release with
# PR #30365 (its backend differs from a9cf5e68's in 53 lines). No release carries 504570f4.
DEFAULT_RELEASES: tuple[Release, ...] = (
    Release("0.5.15.post1", "before", same_files=(BACKEND_FILE,)),
    Release("0.5.16", "dropped"),
)


def tree_root(path: Path, option: str) -> Path:
    """The folder holding ``sglang/`` in a checkout (its root or ``python/``) or an install."""
    for root in (path, path / "python"):
        if (root / "sglang" / "srt").is_dir():
            return root
    raise InputError(f"{option} {path}: no sglang/srt under it (a checkout or an installed tree)")


def installed_release(release: Release, where: Path = INSTALLED) -> Path:
    root = where / release.version
    if not (root / "sglang" / "srt").is_dir():
        raise InputError(
            f"{root}: sglang {release.version} is not installed there (make setup installs it)"
        )
    return root


def download_release(version: str, into: Path, option: str = "--upstream-release") -> Path:
    """pip installs a release's files (no dependencies) into `into`; returns the tree root."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile"]
    done = subprocess.run(
        [*cmd, "--target", str(into), f"sglang=={version}"], capture_output=True, text=True
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise InputError(f"{option} {version}: {last}")
    return tree_root(into, option)


def release_tree(version: str, option: str, where: Path = INSTALLED) -> Path:
    """A release's tree under `where`, fetched there first when it is not yet."""
    root = where / version
    if (root / "sglang" / "srt").is_dir():
        return root
    return download_release(version, root, option)


def install_default_releases(where: Path = INSTALLED) -> None:
    """Set-up: the default releases' files under `where` (each skipped when already there)."""
    for release in DEFAULT_RELEASES:
        release_tree(release.version, "set-up", where)


def published_releases(first: str = FIRST_DSV4) -> list[str]:
    """Every sglang release on the package index from `first` on, oldest first (pip's own
    listing of one package's versions)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "sglang"],
        capture_output=True,
        text=True,
    )
    found = re.search(r"^Available versions: (.+)$", done.stdout, re.M)
    if done.returncode != 0 or found is None:
        last = (done.stderr.strip().splitlines() or ["no listing"])[-1]
        raise InputError(
            f"--history: pip could not list sglang's releases ({last}); give --releases"
        )
    return sorted_releases(found.group(1).split(", "), first)


_RELEASE = re.compile(r"(\d+(?:\.\d+)*)(?:\.post(\d+))?")


def _order(version: str) -> tuple[tuple[int, ...], int]:
    """A final release's place in time (sglang publishes X.Y.Z and X.Y.Z.postN only)."""
    m = _RELEASE.fullmatch(version)
    if m is None:
        raise InputError(f"--releases: {version!r} is not a release number like 0.5.16")
    return tuple(int(p) for p in m.group(1).split(".")), int(m.group(2) or -1)


def sorted_releases(versions: list[str], first: str = FIRST_DSV4) -> list[str]:
    """`versions` from `first` on, oldest first."""
    return [v for v in sorted(versions, key=_order) if _order(v) >= _order(first)]
