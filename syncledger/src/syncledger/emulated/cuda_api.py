"""Stand-ins for torch.cuda's streams, events and synchronize calls on the emulated device, and
for its device queries (`syncledger.emulated.cuda_device`), while it claims `"cuda"`.

Work on the emulated device completes at once, so waits return immediately; what matters is
that each synchronize is recorded, exactly where CUDA would block the host.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from syncledger.emulated import cache, cuda_device, graphs
from syncledger.emulated.capture import wait
from syncledger.emulated.tensor import reported_device
from syncledger.events import SyncKind
from syncledger.rules import classify_empty_cache
from syncledger.wait_timing import timed


class EmuStream(torch.Stream):
    """A stream of the emulated device: a `torch.Stream` (of the host) to PyTorch's C++ side,
    which takes one where a stream is passed (`Tensor.record_stream`)."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return reported_device()

    @property
    def device_index(self) -> int:  # type: ignore[override]
        return 0

    # each stream is its own (to PyTorch every one is the host's stream 0, all equal)
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> EmuStream:
        return super().__new__(cls, device="cpu")

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.priority = priority
        self.cuda_stream = id(self)  # a handle, as torch.cuda.Stream has one

    def synchronize(self) -> None:
        timed(SyncKind.EXPLICIT, wait, SyncKind.EXPLICIT, "Stream.synchronize")

    def is_capturing(self) -> bool:
        return graphs.is_current_stream_capturing()

    def wait_event(self, event: EmuEvent) -> None:
        return None

    def wait_stream(self, stream: EmuStream) -> None:
        return None

    def record_event(self, event: EmuEvent | None = None) -> EmuEvent:
        event = event or EmuEvent()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def __enter__(self) -> EmuStream:
        _STREAMS.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        # its own entry, whatever was entered since (threads share the stack) or cleared (the
        # device ended inside the block); the default stream stays
        for i in range(len(_STREAMS) - 1, 0, -1):
            if _STREAMS[i] is self:
                del _STREAMS[i]
                return


class EmuEvent:
    """An event of the emulated device; `elapsed_time` reports host time between records."""

    def __init__(self, enable_timing: bool = False, **_: Any) -> None:
        self.enable_timing = enable_timing
        self._t_ns: int | None = None

    def record(self, stream: EmuStream | None = None) -> None:
        self._t_ns = time.perf_counter_ns()

    def wait(self, stream: EmuStream | None = None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        timed(SyncKind.EXPLICIT, wait, SyncKind.EXPLICIT, "Event.synchronize")

    def elapsed_time(self, end: EmuEvent) -> float:
        if self._t_ns is None or end._t_ns is None:
            raise RuntimeError("elapsed_time: both events must have been recorded")
        return (end._t_ns - self._t_ns) / 1e6


_DEFAULT = EmuStream()
_STREAMS: list[EmuStream] = [_DEFAULT]


def current_stream(device: Any = None) -> EmuStream:
    return _STREAMS[-1]


def default_stream(device: Any = None) -> EmuStream:
    return _DEFAULT


@contextmanager
def stream(s: EmuStream | None) -> Iterator[EmuStream | None]:
    if s is None:
        yield None
        return
    with s:
        yield s


def synchronize(device: Any = None) -> None:
    timed(SyncKind.EXPLICIT, wait, SyncKind.EXPLICIT, "cuda.synchronize")


def empty_cache() -> None:
    released = cache.release()
    kind = classify_empty_cache(released)
    if kind is not None:
        wait(kind, "empty_cache", released)


def _replacements() -> list[tuple[Any, str, Any]]:
    out: list[tuple[Any, str, Any]] = [
        (torch.cuda, "Stream", EmuStream),
        (torch.cuda, "Event", EmuEvent),
        (torch.cuda, "current_stream", current_stream),
        (torch.cuda, "default_stream", default_stream),
        (torch.cuda, "stream", stream),
        (torch.cuda, "synchronize", synchronize),
        (torch.cuda, "empty_cache", empty_cache),
    ]
    out += [(torch.cuda, name, fn) for name, fn in cuda_device.QUERIES.items()]
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is not None:
        out += [(accelerator, n, fn) for n, fn in cuda_device.ACCELERATOR.items()]
        out += [
            (accelerator, "synchronize", synchronize),
            (accelerator, "current_stream", current_stream),
            (accelerator, "set_stream", lambda stream: None),
        ]
    # no cuDNN behind the emulated device (asking torch.backends.cudnn would warn that)
    out.append((torch.backends.cudnn, "is_acceptable", lambda tensor: False))
    out = [(owner, name, value) for owner, name, value in out if hasattr(owner, name)]
    # CUDA graphs: torch.cuda.graph and make_graphed_callables, PyTorch's own, run on these;
    # a capture stream made for a GPU earlier in the process is not the emulated device's
    out += [
        (torch.cuda, "CUDAGraph", graphs.EmuCUDAGraph),
        (torch.cuda, "graph_pool_handle", graphs.graph_pool_handle),
        (torch.cuda.graphs, "graph_pool_handle", graphs.graph_pool_handle),
        (torch.cuda, "is_current_stream_capturing", graphs.is_current_stream_capturing),
        (torch.cuda.graph, "default_capture_stream", None),
        (torch._C, "_host_emptyCache", lambda: None),  # absent from CPU-only builds
        (torch, "Generator", cuda_device.Generator),
    ]
    return out


_SAVED: list[tuple[Any, str, Any]] = []
_ABSENT = object()  # an attribute the installed PyTorch lacks: removed again at uninstall


def install() -> None:
    """Replace torch.cuda's stream API and device queries with the stand-ins (process-wide,
    until `uninstall`)."""
    if _SAVED:
        return
    for owner, name, value in _replacements():
        _SAVED.append((owner, name, getattr(owner, name, _ABSENT)))
        setattr(owner, name, value)


def uninstall() -> None:
    for owner, name, value in reversed(_SAVED):
        if value is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, value)
    _SAVED.clear()
    del _STREAMS[1:]
