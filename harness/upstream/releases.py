"""Where upstream trees come from: releases installed at set-up, a downloaded release, or a
checkout on disk."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError

REPO = Path(__file__).resolve().parents[2]
# `make setup` installs these releases' files here (pip install --no-deps --target)
INSTALLED = REPO / ".venv" / "upstream"


@dataclass(frozen=True)
class Release:
    version: str
    variant: str  # the model variant it is run against
    # its deepseek_v4_backend.py is byte for byte the variant's commit's: the fidelity table's
    # line numbers apply (else its sites are checked by function)
    exact_lines: bool


# 0.5.15.post1 ships a36c8731's backend file unchanged; 0.5.16 is the first release with
# PR #30365 (its backend differs from a9cf5e68's in 53 lines). No release carries 504570f4.
DEFAULT_RELEASES: tuple[Release, ...] = (
    Release("0.5.15.post1", "before", exact_lines=True),
    Release("0.5.16", "dropped", exact_lines=False),
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


def download_release(version: str, into: Path) -> Path:
    """pip installs a release's files (no dependencies) into `into`; returns the tree root."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile"]
    done = subprocess.run(
        [*cmd, "--target", str(into), f"sglang=={version}"], capture_output=True, text=True
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise InputError(f"--upstream-release {version}: {last}")
    return tree_root(into, "--upstream-release")


def install_default_releases(where: Path = INSTALLED) -> None:
    """Set-up: the default releases' files under `where` (each skipped when already there)."""
    for release in DEFAULT_RELEASES:
        if not (where / release.version / "sglang" / "srt").is_dir():
            download_release(release.version, where / release.version)
