"""What one host-device sync costs, measured: the same step with k injected syncs of a kind,
at stand-in forward durations from host-bound to GPU-bound (scenarios/sync_cost.yaml).

`cases` and `analysis` are pure data and statistics (the report reads them without torch);
`world` is the step the runner drives, registered as the runner's "sync_cost" world.
"""
