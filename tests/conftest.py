"""Shared test set-up: Triton's interpreter on CPU, the sync plugin when not installed, `gpu`
tests skipped without CUDA, and one count pass per scenario configuration for the whole run.

`make test` runs the suite on two pytest-xdist workers, each its own process with its own
session fixtures. A test is safe there when it writes only under its own `tmp_path` (never into
the repository or another fixed path), binds port 0 (never a fixed port), and shares state
with other tests only through fixtures; what every worker must share is kept in files under
the run's shared temporary folder, behind a lock, as `count_passes` does.
"""

from __future__ import annotations

import functools
import os
import pickle
from collections.abc import Callable
from pathlib import Path

# Triton must see this before it is imported anywhere, or kernels try to compile for a GPU.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
from filelock import FileLock


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the workers fill the cores: one intra-op thread each (and in the processes they
        # start), or their threads contend for the cores (a fifth more CPU time on two cores)
        import torch

        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)
    # Installed projects register the plugin through its entry point; running from a source
    # tree (PYTHON=python3 on a GPU box) does not, so register it here once.
    if not config.pluginmanager.has_plugin("syncledger"):
        import syncledger.pytest_plugin as plugin

        if not config.pluginmanager.is_registered(plugin):
            config.pluginmanager.register(plugin, "syncledger")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # modules that hold a slow test first (whole, for their module fixtures): the long tests
    # start early, and the xdist workers finish together on short ones
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu:
        import torch

        if not torch.cuda.is_available():
            for item in gpu:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's temporary folder: shared by its xdist workers, new for every run."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def count_passes(tmp_path_factory: pytest.TempPathFactory) -> Callable:
    """A scenario's count pass on the emulated device, run once per configuration (keyed as the
    gate keys its baselines) in the whole run, whichever worker asks first, and shared by the
    fidelity tests and the strict gate. Read-only."""
    from harness.gate.baseline import config_sha256
    from harness.runner.count_pass import PassRows, run_count_pass
    from harness.runner.device import open_device
    from harness.scenario import LoadedScenario

    folder = _run_folder(tmp_path_factory) / "count_passes"
    folder.mkdir(exist_ok=True)
    mine: dict[str, PassRows] = {}

    def count(loaded: LoadedScenario) -> PassRows:
        key = config_sha256(loaded)
        if key not in mine:
            path = folder / f"{key}.pickle"
            with FileLock(f"{path}.lock"):  # another worker may be counting it now
                if path.exists():
                    mine[key] = pickle.loads(path.read_bytes())
                else:
                    with open_device("emu") as dh:
                        rows = run_count_pass(loaded.scenario, dh.device, show_progress=False)
                    path.write_bytes(pickle.dumps(rows))
                    mine[key] = rows
        return mine[key]

    return count


@pytest.fixture
def small_metadata_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks' timed metadata step made small (batch 8, context 512, one warm-up step):
    for tests of a check's tables and verdicts, not of its numbers."""
    from harness.checks import sync_overhead

    monkeypatch.setattr(sync_overhead, "WARMUP", 1)
    step = functools.partial(sync_overhead.metadata_step, bs=8, ctx=512)
    monkeypatch.setattr(sync_overhead, "metadata_step", step)
