"""What the ledger records: sync kinds, events, region entries, and where a sync came from."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from enum import Enum
from types import FrameType


class SyncKind(str, Enum):
    """Host-device synchronization kinds, after CUDA's API synchronization rules."""

    D2H_READ = "d2h_read"  # the host waits for a device value: item, tolist, cpu(), nonzero...
    H2D_BLOCKING = (
        "h2d_blocking"  # a blocking copy from host memory (torch.tensor(list, device=...))
    )
    PAGEABLE_ASYNC = (
        "pageable_async"  # non_blocking copy to/from pageable memory: the driver stages
    )
    EXPLICIT = "explicit"  # stream / event / device synchronize
    ALLOCATOR = "allocator"  # the caching allocator frees device memory (cudaFree synchronizes)

    def __str__(self) -> str:
        return self.value


Frame = tuple[str, int, str]  # (file, line, function)


@dataclass(frozen=True)
class SyncEvent:
    kind: SyncKind
    op: str
    region: str
    location: str  # "path/to/file.py:LINE" of the first frame outside torch and harness.sync
    function: str
    stack: tuple[Frame, ...]
    step: int | None = None
    nbytes: int | None = None
    tags: tuple[tuple[str, str], ...] = ()

    @property
    def tag_dict(self) -> dict[str, str]:
        return dict(self.tags)

    def describe(self) -> str:
        where = f"{self.location} in {self.function}"
        size = f", {self.nbytes} B" if self.nbytes is not None else ""
        return f"{self.kind.value} {self.op}{size} at {where} [region {self.region or '-'}]"


@dataclass(frozen=True)
class RegionEntry:
    """One entry into a region while a ledger was active (lets reports emit zero-sync rows)."""

    region: str
    step: int | None
    tags: tuple[tuple[str, str], ...] = field(default=())


# Frames inside these folders are machinery, not the code that caused a sync.
_TORCH_DIR = os.path.dirname(os.path.abspath(__import__("torch").__file__)) + os.sep
_SYNC_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIP_PREFIXES: tuple[str, ...] = (_TORCH_DIR, _SYNC_DIR)
_SKIP_FILES: set[str] = {"<frozen runpy>", "<string>"}
_CWD = os.getcwd() + os.sep
MAX_STACK_DEPTH = 16


def _is_machinery(filename: str) -> bool:
    return (
        filename.startswith(_SKIP_PREFIXES)
        or filename in _SKIP_FILES
        or filename.endswith(("/contextlib.py", "/warnings.py"))
    )


def skip_frames_of(*filenames: str) -> None:
    """Treat these files as machinery too (e.g. a launcher that runs user scripts)."""
    _SKIP_FILES.update(os.path.abspath(f) for f in filenames)


def _short(filename: str) -> str:
    return filename[len(_CWD) :] if filename.startswith(_CWD) else filename


def capture_stack(skip: int = 1) -> tuple[Frame, ...]:
    """The caller's Python frames, innermost first, with machinery frames removed."""
    frame: FrameType | None = sys._getframe(skip)
    out: list[Frame] = []
    while frame is not None and len(out) < MAX_STACK_DEPTH:
        code = frame.f_code
        filename = code.co_filename
        if not _is_machinery(filename):
            out.append((_short(filename), frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(out)
