"""What the ledger records: sync kinds, events, region entries, and where a sync came from."""

from __future__ import annotations

import os
import sys
from enum import Enum
from importlib.util import find_spec
from types import CodeType, FrameType
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


# Where a sync came from, as recorded: the code object and the instruction (bytecode offset) of
# each frame kept, innermost first, flattened: (code, lasti, code, lasti, ...). Cheap to take at
# the moment of the sync; `resolve_site` turns it into file, line and function when read.
Site = tuple[object, ...]


class SyncEvent:
    """One sync (or hazard) a ledger recorded. Read-only once recorded.

    Recording keeps only what identifies the site at that moment (`Site`); the stack, location
    and function are worked out the first time one of them is read, then kept.
    """

    __slots__ = (
        "_site",
        "_stack",
        "detector",
        "kind",
        "nbytes",
        "op",
        "pid",
        "region",
        "step",
        "tags",
        "thread",
    )

    def __init__(
        self,
        kind: SyncKind,
        op: str,
        region: str,
        site: Site = (),
        step: int | None = None,
        nbytes: int | None = None,
        tags: tuple[tuple[str, str], ...] = (),
        thread: str = "",  # the name of the thread that made it
        pid: int = 0,  # the process that made it (a followed child's own pid)
        detector: str = "",  # one of DETECTORS
        stack: tuple[Frame, ...] | None = None,  # given resolved (a followed child's events)
    ) -> None:
        self.kind = kind
        self.op = op
        self.region = region
        self.step = step
        self.nbytes = nbytes
        self.tags = tags
        self.thread = thread
        self.pid = pid
        self.detector = detector
        self._site = site
        self._stack = stack

    @property
    def stack(self) -> tuple[Frame, ...]:
        """The frames outside torch and the ledger, innermost first (at most MAX_STACK_DEPTH)."""
        stack = self._stack
        if stack is None:
            stack = self._stack = resolve_site(self._site)
        return stack

    @property
    def location(self) -> str:
        """`path/to/file.py:LINE` of the first frame outside torch and the ledger."""
        stack = self.stack
        return f"{stack[0][0]}:{stack[0][1]}" if stack else "<unknown>:0"

    @property
    def function(self) -> str:
        stack = self.stack
        return stack[0][2] if stack else "<unknown>"

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

    def __repr__(self) -> str:
        return f"SyncEvent({self.describe()}, {self.detector})"


class RegionEntry(NamedTuple):
    """One entry into a region while a ledger was active (lets reports emit zero-sync rows).
    A tuple: one is made per region entered, on the hot path."""

    region: str
    step: int | None
    tags: tuple[tuple[str, str], ...] = ()


# Frames inside these folders are machinery, not the code that caused a sync. torch's is found
# without importing it: the pytest plugin reads this module in runs that never use torch, and a
# tool that only reads results may name its own frames here where torch is not installed.
try:
    _TORCH = find_spec("torch")
except ImportError:  # an import system that refuses it: torch is not there
    _TORCH = None
_SYNC_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIP_PREFIXES: tuple[str, ...] = (_SYNC_DIR,)
if _TORCH is not None and _TORCH.origin:
    _SKIP_PREFIXES += (os.path.dirname(os.path.abspath(_TORCH.origin)) + os.sep,)
_SKIP_FILES: set[str] = {"<frozen runpy>", "<string>"}
_CWD = os.getcwd() + os.sep
MAX_STACK_DEPTH = 16
# file name -> whether its frames are machinery: decided once per file, looked up per frame
_MACHINERY: dict[str, bool] = {}
# a module's file (its globals' __file__) -> whether the module is machinery. A frame's globals
# cost nothing to read, its code an audit event (`frame.f_code` raises one, as `id()` does, and
# the ledger's audit hook runs for each): frames of machinery modules are passed over without.
_MACHINERY_MODULES: dict[object, bool] = {}


def is_machinery(filename: str) -> bool:
    """Whether a frame in this file is torch's, the ledger's or a runner's, not the program's."""
    return (
        filename.startswith(_SKIP_PREFIXES)
        or filename in _SKIP_FILES
        or filename.endswith(("/contextlib.py", "/warnings.py"))
    )


def _machinery_module(globals_: dict[str, object]) -> bool:
    """Whether the module these globals belong to is machinery by its file (a frozen module's
    code names `<frozen NAME>`, its module the .py file). Globals with no file (code made at run
    time) are not: their frames' code decides."""
    file, name = globals_.get("__file__"), globals_.get("__name__")
    if not isinstance(file, str):
        return False
    return is_machinery(file) or is_machinery(f"<frozen {name}>")


def skip_frames_of(*filenames: str) -> None:
    """Treat these files as machinery too (e.g. a launcher that runs user scripts)."""
    _SKIP_FILES.update(os.path.abspath(f) for f in filenames)
    _forget()


def skip_frames_under(*folders: str) -> None:
    """Treat every file under these folders as machinery too (e.g. a test runner's own)."""
    global _SKIP_PREFIXES
    new = (os.path.join(os.path.abspath(f), "") for f in folders)
    _SKIP_PREFIXES += tuple(p for p in dict.fromkeys(new) if p not in _SKIP_PREFIXES)
    _forget()


def _forget() -> None:
    _MACHINERY.clear()
    _MACHINERY_MODULES.clear()


def _short(filename: str) -> str:
    return filename[len(_CWD) :] if filename.startswith(_CWD) else filename


def absolute_file(filename: str) -> str:
    """A frame's file as an absolute path (frames under the working folder are kept short)."""
    return filename if os.path.isabs(filename) or filename.startswith("<") else _CWD + filename


def capture_site(skip: int = 1) -> Site:
    """The caller's frames outside the machinery, innermost first, as they are now: each one's
    code object and instruction. Nothing is formatted here (see `resolve_site`)."""
    frame: FrameType | None = sys._getframe(skip)
    by_file, by_module = _MACHINERY, _MACHINERY_MODULES
    out: list[object] = []
    keep = out.append
    left = MAX_STACK_DEPTH
    while frame is not None:
        g = frame.f_globals
        module = g.get("__file__")
        passed = by_module.get(module)
        if passed is None:
            passed = by_module[module] = _machinery_module(g)
        if not passed:
            code = frame.f_code
            filename = code.co_filename
            skipped = by_file.get(filename)
            if skipped is None:
                skipped = by_file[filename] = is_machinery(filename)
            if not skipped:
                keep(code)
                keep(frame.f_lasti)
                left -= 1
                if not left:
                    break
        frame = frame.f_back
    return tuple(out)


def resolve_site(site: Site) -> tuple[Frame, ...]:
    """(file, line, function) of each frame of a site taken by `capture_site`."""
    return tuple(_frame(site[i], site[i + 1]) for i in range(0, len(site), 2))  # type: ignore[arg-type]


# (id(code), lasti) -> (code, frame), for reading: the code is kept so that its id names no other
_FRAMES: dict[tuple[int, int], tuple[CodeType, Frame]] = {}


def _frame(code: CodeType, lasti: int) -> Frame:
    known = _FRAMES.get((id(code), lasti))
    if known is not None and known[0] is code:
        return known[1]
    frame = (_short(code.co_filename), _line(code, lasti), code.co_name)
    _FRAMES[(id(code), lasti)] = (code, frame)
    return frame


def _line(code: CodeType, lasti: int) -> int:
    """The line of the instruction at byte offset `lasti`, as the frame's f_lineno said then."""
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return code.co_firstlineno if line is None else line
    return code.co_firstlineno


def caller_frame(frame: FrameType | None) -> Frame | None:
    """The first frame from `frame` outwards that is not torch's or the ledger's machinery."""
    while frame is not None:
        code = frame.f_code
        skipped = _MACHINERY.get(code.co_filename)
        if skipped is None:
            skipped = _MACHINERY[code.co_filename] = is_machinery(code.co_filename)
        if not skipped:
            return (_short(code.co_filename), frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def capture_stack(skip: int = 1) -> tuple[Frame, ...]:
    """The caller's Python frames, innermost first, with machinery frames removed."""
    return resolve_site(capture_site(skip + 1))
