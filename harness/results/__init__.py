"""Run folders: tidy tables and meta.json; rates per step, bootstrap statistics, the summary
and compare."""
