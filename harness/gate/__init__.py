"""The CI sync-count gate: baselines and the exact comparison."""
