"""What one host-device sync costs, measured: the same step with k injected syncs of a kind,
at stand-in forward durations from host-bound to GPU-bound (scenarios/sync_cost.yaml).

A world (``plugin``): ``section`` is its scenario section, ``cases`` its cases, ``world`` the
step the runner drives; ``analysis`` and ``summary`` are pure data and statistics (the summary
reads them without torch), ``plots`` its figure.
"""
