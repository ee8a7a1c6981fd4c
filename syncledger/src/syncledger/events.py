"""What the ledger records: sync kinds, events, region entries, and where a sync came from."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import Enum
from importlib.util import find_spec
from types import FrameType
from typing import NamedTuple


class SyncKind(str, Enum):
    """What made the host wait for the device (or nearly did), after CUDA's synchronization rules.

    Every kind is a sync except `PAGEABLE_STAGED`, a non-blocking hazard: kept in the ledger
    (and in syncs.csv) with its bytes, never in a sync count.
    """

    D2H_READ = "d2h_read"  # the host reads a device value: item, tolist, cpu(), nonzero...
    H2D_BLOCKING = "h2d_blocking"  # a blocking copy from host memory, or one the op makes itself
    # a non_blocking copy the host still waits for: to or through pageable memory (the driver
    # stages it), or host-to-device above the driver's staging threshold
    PAGEABLE_ASYNC = "pageable_async"
    # a non_blocking host-to-device copy from pageable memory at or below the staging threshold:
    # the driver stages it and returns at once, but a few of them queued behind device work
    # fill the staging buffer and then the host waits
    PAGEABLE_STAGED = "pageable_staged"
    EXPLICIT = "explicit"  # stream / event / device synchronize
    ALLOCATOR = "allocator"  # empty_cache returning cached blocks to the driver (cudaFree waits)
    # a wait a detector saw whose kind the ledger failed to decide: recorded (and warned about
    # once) instead of raising into the profiled program
    UNCLASSIFIED = "unclassified"

    @property
    def is_sync(self) -> bool:
        """True when the host waits; False for a hazard that is only recorded."""
        return self is not SyncKind.PAGEABLE_STAGED

    def __str__(self) -> str:
        return self.value


Frame = tuple[str, int, str]  # (file, line, function)

# Which part of the ledger saw a sync: a Python interceptor of the call, PyTorch's sync debug
# mode, a CUPTI driver-API callback, or the emulated device's door.
DETECTORS = ("interceptor", "sync_debug_mode", "cupti", "emulated")


@dataclass(frozen=True)
class SyncEvent:
    kind: SyncKind
    op: str
    region: str
    location: str  # "path/to/file.py:LINE" of the first frame outside torch and syncledger
    function: str
    stack: tuple[Frame, ...]
    step: int | None = None
    nbytes: int | None = None
    tags: tuple[tuple[str, str], ...] = ()
    thread: str = ""  # the name of the thread that made it
    pid: int = 0  # the process that made it (a followed child's own pid)
    detector: str = ""  # one of DETECTORS

    @property
    def is_sync(self) -> bool:
        return self.kind.is_sync

    @property
    def tag_dict(self) -> dict[str, str]:
        return dict(self.tags)

    def to_json(self) -> dict[str, object]:
        """A plain-JSON form (a followed child process spools its events this way)."""
        return {
            "kind": self.kind.value,
            "op": self.op,
            "region": self.region,
            "location": self.location,
            "function": self.function,
            "stack": [list(f) for f in self.stack],
            "step": self.step,
            "nbytes": self.nbytes,
            "tags": [list(t) for t in self.tags],
            "thread": self.thread,
            "pid": self.pid,
            "detector": self.detector,
        }

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> SyncEvent:
        return cls(
            kind=SyncKind(doc["kind"]),
            op=str(doc["op"]),
            region=str(doc["region"]),
            location=str(doc["location"]),
            function=str(doc["function"]),
            stack=tuple((str(f), int(ln), str(fn)) for f, ln, fn in doc["stack"]),  # type: ignore[union-attr]
            step=doc["step"],  # type: ignore[arg-type]
            nbytes=doc["nbytes"],  # type: ignore[arg-type]
            tags=tuple((str(k), str(v)) for k, v in doc["tags"]),  # type: ignore[union-attr]
            thread=str(doc["thread"]),
            pid=int(doc["pid"]),  # type: ignore[arg-type]
            detector=str(doc["detector"]),
        )

    def describe(self) -> str:
        where = f"{self.location} in {self.function}"
        size = f", {self.nbytes} B" if self.nbytes is not None else ""
        hazard = "" if self.is_sync else " (hazard, not a sync)"
        return f"{self.kind.value} {self.op}{size}{hazard} at {where} [region {self.region or '-'}]"


class RegionEntry(NamedTuple):
    """One entry into a region while a ledger was active (lets reports emit zero-sync rows).
    A tuple: one is made per region entered, on the hot path."""

    region: str
    step: int | None
    tags: tuple[tuple[str, str], ...] = ()


# Frames inside these folders are machinery, not the code that caused a sync. torch's is found
# without importing it: the pytest plugin reads this module in runs that never use torch.
_TORCH_DIR = os.path.dirname(os.path.abspath(find_spec("torch").origin)) + os.sep
_SYNC_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIP_PREFIXES: tuple[str, ...] = (_TORCH_DIR, _SYNC_DIR)
_SKIP_FILES: set[str] = {"<frozen runpy>", "<string>"}
_SITE_SKIP = (_SYNC_DIR, os.path.abspath(__import__("warnings").__file__))
_CWD = os.getcwd() + os.sep
MAX_STACK_DEPTH = 16


def is_machinery(filename: str) -> bool:
    """Whether a frame in this file is torch's, the ledger's or a runner's, not the program's."""
    return (
        filename.startswith(_SKIP_PREFIXES)
        or filename in _SKIP_FILES
        or filename.endswith(("/contextlib.py", "/warnings.py"))
    )


def skip_frames_of(*filenames: str) -> None:
    """Treat these files as machinery too (e.g. a launcher that runs user scripts)."""
    _SKIP_FILES.update(os.path.abspath(f) for f in filenames)


def skip_frames_under(*folders: str) -> None:
    """Treat every file under these folders as machinery too (e.g. a test runner's own)."""
    global _SKIP_PREFIXES
    new = (os.path.join(os.path.abspath(f), "") for f in folders)
    _SKIP_PREFIXES += tuple(p for p in dict.fromkeys(new) if p not in _SKIP_PREFIXES)


def _short(filename: str) -> str:
    return filename[len(_CWD) :] if filename.startswith(_CWD) else filename


def absolute_file(filename: str) -> str:
    """A frame's file as an absolute path (frames under the working folder are kept short)."""
    return filename if os.path.isabs(filename) or filename.startswith("<") else _CWD + filename


def call_site(skip: int = 1) -> tuple[int, int] | None:
    """Identity of the Python frame, and its instruction, that called into the ledger's hooks:
    a CUPTI callback and the sync debug mode's warning raised by the same call see the same."""
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None and frame.f_code.co_filename.startswith(_SITE_SKIP):
        frame = frame.f_back
    return None if frame is None else (id(frame), frame.f_lasti)


def caller_frame(frame: FrameType | None) -> Frame | None:
    """The first frame from `frame` outwards that is not torch's or the ledger's machinery."""
    while frame is not None:
        code = frame.f_code
        if not is_machinery(code.co_filename):
            return (_short(code.co_filename), frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def capture_stack(skip: int = 1) -> tuple[Frame, ...]:
    """The caller's Python frames, innermost first, with machinery frames removed."""
    frame: FrameType | None = sys._getframe(skip)
    out: list[Frame] = []
    while frame is not None and len(out) < MAX_STACK_DEPTH:
        code = frame.f_code
        filename = code.co_filename
        if not is_machinery(filename):
            out.append((_short(filename), frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(out)
