"""One sglang tree loaded for a run: its modules, the stand-ins in force, its label."""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from harness.upstream.loader import drift_named, tree_imported
from harness.upstream.standins import COMPILED_MODULES, Installed, compiled_modules, install
from harness.upstream.world import CUDA_GATED, MODULES, UpstreamWorld, emulated_device_module


@contextmanager
def loaded(
    root: Path, device: torch.device, *, emulated: bool
) -> Iterator[tuple[UpstreamWorld, Installed]]:
    """The tree under `root` (the folder holding ``sglang/``) imported, its stand-ins installed."""
    calls: Counter = Counter()
    device_module = emulated_device_module() if emulated else nullcontext()
    with compiled_modules(calls), tree_imported(root, COMPILED_MODULES), device_module:
        with drift_named(loading=True):
            modules = {n: importlib.import_module(n) for n in MODULES}
            for name in CUDA_GATED:
                if hasattr(modules[name], "_is_cuda"):
                    modules[name]._is_cuda = True
            installed = install(root, calls, emulated=emulated)
        yield UpstreamWorld(modules, device), installed
