"""Plots and tables of a run folder. Reads result files only (never the backend or serving)."""

from harness.report.figures import FIGURES, write_report
from harness.results.load import RunData, combine_runs, find_runs, load_run, resolve_run

__all__ = [
    "FIGURES",
    "RunData",
    "combine_runs",
    "find_runs",
    "load_run",
    "resolve_run",
    "write_report",
]
