"""The runner: cells of a scenario through the count pass and the time pass."""
