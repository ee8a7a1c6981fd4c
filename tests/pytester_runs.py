"""In-process pytest runs of small test projects, with the sync plugin loaded by module.

An in-process run forgets the modules first imported during it. torch imports DTensor at the
first op on any tensor subclass (the emulated device's), and DTensor's modules register operator
libraries, which cannot be registered twice: imported first inside a run, they would fail at
their next import in this process. So they are imported here, before any run.
"""

from __future__ import annotations

import pytest
import torch.distributed.tensor  # noqa: F401

# The plugin by module, whether or not its entry point is installed (when it is not, this
# process has imported the plugin unrewritten, which pytest warns about); plugins that only slow
# an inner run down (hypothesis imports itself afresh in each) left out.
FLAGS = (
    "-W",
    "ignore::pytest.PytestAssertRewriteWarning",
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
