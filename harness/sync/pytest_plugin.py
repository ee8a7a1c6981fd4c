"""pytest integration: a `sync_ledger` fixture and a `@pytest.mark.max_syncs(n, kinds=None)` marker.

Tests that use either run on the device `--sync-device auto|cuda|emu` names (default `auto`:
CUDA when present, else the emulated device, where code that says `"cuda"` runs on the CPU), as
`python -m harness syncs` does. The pytest header says which, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch

from harness.sync.device import DEVICE_KINDS, resolve_kind
from harness.sync.emulated import emulated_device
from harness.sync.ledger import SyncLedger, max_syncs

_DEVICE = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("harness-sync").addoption(
        "--sync-device",
        choices=DEVICE_KINDS,
        default="auto",
        help="device for tests using sync_ledger / max_syncs (auto: CUDA if present, else the "
        "emulated device)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "max_syncs(n, kinds=None): fail when the test makes more than n host-device syncs",
    )
    # a plugin registered late (from a conftest) has no option: its default then applies
    wanted = config.getoption("sync_device", default="auto")
    try:
        config.stash[_DEVICE] = resolve_kind(wanted)
    except ValueError as exc:
        raise pytest.UsageError(f"--sync-device {wanted}: {exc}") from None


def pytest_report_header(config: pytest.Config) -> str:
    if config.stash[_DEVICE] == "emu":
        return (
            "sync ledger: tests using sync_ledger or max_syncs run on the emulated device "
            "(CPU; code that says 'cuda' runs there)"
        )
    return f"sync ledger: tests using sync_ledger or max_syncs run on CUDA ({torch.cuda.get_device_name()})"


def _on_device(config: pytest.Config) -> contextlib.AbstractContextManager[object]:
    if config.stash[_DEVICE] == "emu":
        return emulated_device(claim_cuda=True)
    return contextlib.nullcontext()


@pytest.fixture
def sync_ledger(request: pytest.FixtureRequest) -> Iterator[SyncLedger]:
    """A ledger open for the whole test body, on the device of `--sync-device`."""
    with _on_device(request.config), SyncLedger() as ledger:
        yield ledger


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    marker = item.get_closest_marker("max_syncs")
    if marker is None:
        return (yield)
    with _on_device(item.config), max_syncs(*marker.args, **marker.kwargs):
        return (yield)
