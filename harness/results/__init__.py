"""Run folders: tidy tables, meta.json, the summary table and compare."""
