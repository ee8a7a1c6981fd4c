"""Plots and tables of a run folder. Reads result files only (never the backend or serving);
the figures are the worlds' (harness.report.figures.ReportPart)."""

from harness.report.figures import ReportPart, serving_rows, write_report
from harness.results.load import RunData, combine_runs, find_runs, load_run, resolve_run

__all__ = [
    "ReportPart",
    "RunData",
    "combine_runs",
    "find_runs",
    "load_run",
    "resolve_run",
    "serving_rows",
    "write_report",
]
