"""tinyserve: the batch metadata of a toy paged-attention server (a sample project for sync
snapshots)."""
