"""The failures the ledger raises in tests. They import nothing, so the pytest plugin can name
them in every run without importing torch."""


class SyncBudgetExceeded(AssertionError):
    """A block made more host-device syncs than its budget allows."""


class SyncSnapshotMismatch(AssertionError):
    """A test's syncs differ from its snapshot in a way that fails (grew, or strict)."""


class SyncMeasuredNothing(AssertionError):
    """A budgeted test put no tensor on the device the ledger watches (`--sync-strict`)."""


class SyncMeasuredNothingWarning(UserWarning):
    """A budgeted test put no tensor on the device the ledger watches: its budget could not
    fail (without `--sync-strict`, a warning)."""


class SyncMarkerError(ValueError):
    """A `max_syncs` marker whose arguments no budget can be made from."""
