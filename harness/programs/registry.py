"""The programs: each registered with the libraries it needs and whether those load with a
CPU-only PyTorch (PyPI's torchvision does not: its C++ ops link against CUDA's libraries)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

Step = Callable[[], Any]
# builds the program's inputs (a model, data) on the device from a fixed seed, outside anything
# measured, and returns its step: the calls that run under the ledger, returning their output
Prepare = Callable[["torch.device"], Step]


@dataclass(frozen=True)
class Program:
    name: str
    library: str  # the library whose code it runs
    what: str  # one line: what the program does
    prepare: Prepare
    needs: tuple[str, ...] = ()  # modules that must import
    cpu_torch: bool = True  # False: its libraries do not load beside a CPU-only PyTorch

    def missing(self) -> list[str]:
        """The modules it needs that this environment lacks."""
        return [m for m in self.needs if importlib.util.find_spec(m) is None]


PROGRAMS: dict[str, Program] = {}  # filled by the program modules (harness.programs.catalogue)


def program(
    library: str, what: str, *, needs: tuple[str, ...] = (), cpu_torch: bool = True
) -> Callable[[Prepare], Prepare]:
    """Register the decorated function as a program named after it."""

    def register(fn: Prepare) -> Prepare:
        name = fn.__name__
        if name in PROGRAMS:
            raise ValueError(f"program {name!r} registered twice")
        PROGRAMS[name] = Program(name, library, what, fn, needs, cpu_torch)
        return fn

    return register
