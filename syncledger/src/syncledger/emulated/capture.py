"""Stream capture on the emulated device, and the one way its code makes the host wait.

`wait` records a wait, or, while a CUDA graph captures, refuses it as CUDA does (the stream is
capturing) and leaves the capture invalid, so that `end` fails too. While a graph captures,
every aten op passes through a door that also records it as a step of the graph
(`syncledger.emulated.graphs`), and the factories that bypass the door record theirs (`record`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from syncledger.events import SyncKind
from syncledger.record import record_sync

_CAPTURE_ERROR = "CUDA error: operation not permitted when stream is capturing"
INVALIDATED = "CUDA error: operation failed due to a previous error during capture"
ERROR = getattr(torch, "AcceleratorError", RuntimeError)  # what CUDA errors raise (torch >= 2.8)


@dataclass
class Step:
    run: Callable[[], Any]  # does the step's work again; returns its results
    out: Any  # the results captured: replay writes into them


@dataclass
class _Capture:
    steps: list[Step] | None = None  # the capturing graph's steps; None: nothing captures
    invalid: str | None = None  # the wait that broke the capture


CAPTURE = _Capture()


def wait(kind: SyncKind, op: str, nbytes: int | None = None) -> None:
    """The host waits (or a copy is staged) on the emulated device: recorded, or, while a graph
    captures, refused as CUDA refuses it."""
    if CAPTURE.steps is not None:
        CAPTURE.invalid = op
        raise ERROR(
            f"{_CAPTURE_ERROR} (emulated device: {op} makes the host wait, or copies through "
            f"pageable memory, while a CUDA graph captures; kind {kind.value})"
        )
    record_sync(kind, op, nbytes)


def record(run: Callable[[], Any], out: Any) -> None:
    """Add a step to the graph capturing now: `run` redoes it, `out` holds what it made."""
    steps = CAPTURE.steps
    if steps is not None:
        steps.append(Step(run, out))
