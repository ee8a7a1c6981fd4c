"""pytest integration: a `sync_ledger` fixture and a `@pytest.mark.max_syncs(n, kinds=None)` marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.sync.ledger import SyncLedger, max_syncs


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "max_syncs(n, kinds=None): fail when the test makes more than n host-device syncs",
    )


@pytest.fixture
def sync_ledger() -> Iterator[SyncLedger]:
    """A ledger open for the whole test body."""
    with SyncLedger() as ledger:
        yield ledger


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    marker = item.get_closest_marker("max_syncs")
    if marker is None:
        return (yield)
    with max_syncs(*marker.args, **marker.kwargs):
        return (yield)
