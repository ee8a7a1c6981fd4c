"""In-process pytest runs of small test projects, with the sync plugin loaded by module."""

from __future__ import annotations

import pytest

# The plugin by module, whether or not its entry point is installed; plugins that only slow an
# inner run down (hypothesis imports itself afresh in each) left out.
FLAGS = (
    "-p",
    "no:harness_sync",
    "-p",
    "harness.sync.pytest_plugin",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
)


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # exit code 2 (bad input) is not a Ctrl-C of the outer run
    return pytester.runpytest_inprocess(*FLAGS, *args, no_reraise_ctrlc=True)
