"""CUDA graphs on the emulated device: `torch.cuda.CUDAGraph`, and through it PyTorch's own
`torch.cuda.graph` and `make_graphed_callables`.

Capture runs the work once, as on CUDA (the static tensors hold its results), and records each
step (`syncledger.emulated.capture`): every aten op, every factory. Replay runs the steps again
on the same tensors, writing each result into the tensor captured for it, as a graph's kernels
write into their pool; a capture that succeeded made no sync, so neither does its replay.
Anything that would make the host wait while a graph captures fails as on CUDA; the syncs made
around a capture (`torch.cuda.graph`'s own synchronize and `empty_cache` before it begins) are
recorded as on CUDA. One capture at a time, from any thread (CUDA's "global" capture mode).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from syncledger.emulated import capture
from syncledger.emulated.tensor import EmulationError, EmuTensor


def _write(captured: Any, again: Any) -> None:
    if isinstance(captured, (list, tuple)):
        for c, a in zip(captured, again):
            _write(c, a)
        return
    if not isinstance(captured, torch.Tensor):
        return
    dst = captured._elem if isinstance(captured, EmuTensor) else captured
    src = again._elem if isinstance(again, EmuTensor) else again
    if dst is not src:
        dst.copy_(src)


def _begin(steps: list[capture.Step]) -> None:
    """A graph starts capturing into `steps` (ops route through the capturing door meanwhile)."""
    if capture.CAPTURE.steps is not None:
        raise EmulationError(
            "the emulated device captures one CUDA graph at a time; another is capturing"
        )
    capture.CAPTURE.steps, capture.CAPTURE.invalid = steps, None
    plain = EmuTensor.door

    def capturing_door(func: Any, args: tuple, kwargs: dict) -> Any:
        out = plain(func, args, kwargs)
        steps.append(capture.Step(lambda: plain(func, args, kwargs), out))
        return out

    EmuTensor.door = staticmethod(capturing_door)  # type: ignore[assignment]
    _PLAIN_DOOR.append(plain)


def _end(steps: list[capture.Step]) -> None:
    """The capture into `steps` ends; raises as CUDA does when a wait was refused in it."""
    if capture.CAPTURE.steps is not steps:
        raise EmulationError("capture_end: this graph is not capturing")
    EmuTensor.door = staticmethod(_PLAIN_DOOR.pop())  # type: ignore[assignment]
    invalid, capture.CAPTURE.steps, capture.CAPTURE.invalid = capture.CAPTURE.invalid, None, None
    if invalid is not None:
        steps.clear()
        raise capture.ERROR(f"{capture.INVALIDATED} (emulated device: {invalid} was refused in it)")


_PLAIN_DOOR: list[Any] = []


_pools = itertools.count(1)


def graph_pool_handle() -> tuple[int, int]:
    """A token naming a memory pool that graphs may share (all memory is the host's here)."""
    return (next(_pools), 0)


class EmuCUDAGraph:
    """`torch.cuda.CUDAGraph` on the emulated device."""

    def __init__(self, keep_graph: bool = False) -> None:
        self.steps: list[capture.Step] = []
        self._pool = graph_pool_handle()
        self._captured = False

    def capture_begin(
        self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global", **_: Any
    ) -> None:
        if pool is not None:
            self._pool = pool
        self.steps = []
        self._captured = False
        _begin(self.steps)

    def capture_end(self) -> None:
        _end(self.steps)
        self._captured = True

    def replay(self) -> None:
        if not self._captured:
            raise EmulationError("replay: the graph has not been captured")
        with torch.no_grad():  # autograd's captured work replays as its ops, recorded once
            for step in self.steps:
                _write(step.out, step.run())

    def reset(self) -> None:
        self.steps = []
        self._captured = False

    def pool(self) -> tuple[int, int]:
        return self._pool

    def instantiate(self) -> None:
        return None

    def enable_debug_mode(self) -> None:
        return None

    def debug_dump(self, debug_path: str) -> None:
        raise EmulationError("debug_dump: the emulated device has no CUDA graph to dump")

    def raw_cuda_graph(self) -> int:
        raise EmulationError("raw_cuda_graph: the emulated device has no cudaGraph_t")

    def raw_cuda_graph_exec(self) -> int:
        raise EmulationError("raw_cuda_graph_exec: the emulated device has no cudaGraphExec_t")


def is_current_stream_capturing() -> bool:
    return capture.CAPTURE.steps is not None
