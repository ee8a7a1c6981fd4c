"""The failures the ledger raises in tests. They import nothing, so the pytest plugin can name
them in every run without importing torch."""


class SyncBudgetExceeded(AssertionError):
    """A block made more host-device syncs than its budget allows."""


class SyncSnapshotMismatch(AssertionError):
    """A test's syncs differ from its snapshot in a way that fails (grew, or strict)."""
