"""tinyserve: the batch metadata of a toy paged-attention server (a sample project that adopts
the sync ledger: budgets in its tests, and sync snapshots of its whole suite)."""
