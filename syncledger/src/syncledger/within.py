"""Counting only the code under test: syncs whose stack passes through named packages or paths.

A test's own scaffolding syncs too (building inputs with `torch.tensor(..., device=)`, checking
results with `.cpu()` or `torch.equal`); a scope leaves those out. An entry is a path when it
holds a `/` or ends in `.py` (a folder or a file, relative to `base`), else an importable module
or package name, found where Python would import it from (without importing it, unless it is a
submodule, whose parents are imported). Only the frames the ledger keeps are looked at: the
innermost `syncledger.events.MAX_STACK_DEPTH` outside torch, the ledger and the test runner.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from syncledger.events import SyncEvent, absolute_file


@dataclass(frozen=True)
class Within:
    """The code a count is limited to: `entries` as given, `roots` what they resolved to
    (folders ending in a separator, or files)."""

    entries: tuple[str, ...]
    roots: tuple[str, ...]

    def holds(self, event: SyncEvent) -> bool:
        """Whether a frame of the event's stack is in this code."""
        return any(absolute_file(f).startswith(self.roots) for f, _, _ in event.stack)

    def describe(self) -> str:
        return ", ".join(self.entries)


def resolve_within(within: str | Iterable[str] | Within, base: Path | None = None) -> Within:
    """`within` resolved (paths against `base`, default the working folder); a ValueError names
    an entry that is neither an importable module nor an existing path, and refuses an empty
    scope (it would count nothing, so no budget on it could fail)."""
    if isinstance(within, Within):
        return within
    entries = (within,) if isinstance(within, str) else tuple(within)
    if not entries:
        raise ValueError("within is empty: a budget on no code can never fail; leave it out")
    for e in entries:
        if not isinstance(e, str) or not e:
            raise ValueError(f"within: expected package names or paths, got {e!r}")
    folder = Path.cwd() if base is None else base
    return Within(entries, tuple(r for e in entries for r in _roots(e, folder)))


def _is_path(entry: str) -> bool:
    return "/" in entry or os.sep in entry or entry.endswith(".py")


def _roots(entry: str, base: Path) -> list[str]:
    if _is_path(entry):
        path = Path(os.path.normpath(base / entry))
        if not path.exists():
            raise ValueError(f"within: no such file or folder {entry!r} (in {base})")
        return [str(path) + os.sep if path.is_dir() else str(path)]
    try:
        spec = find_spec(entry)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise ValueError(
            f"within: {entry!r} is not an importable module or package (give a path with a '/' "
            "for code that is not on the import path)"
        )
    if spec.submodule_search_locations:  # a package (a namespace package may span folders)
        return [os.path.normpath(f) + os.sep for f in spec.submodule_search_locations]
    return [os.path.normpath(str(spec.origin))]
