"""In-process pytest runs of small test projects, with the sync plugin loaded by module.

An in-process run forgets the modules first imported during it, and a module imported again
is a second copy. The ledger's modules hold process state (the thread state, the installed
interceptors) that two copies would split, and torch's DTensor, which torch imports at the first
op on any tensor subclass (the emulated device's), registers operator libraries that cannot be
registered twice. So both are imported here, before any run.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import torch.distributed.tensor  # noqa: F401

import syncledger

for _module in pkgutil.walk_packages(syncledger.__path__, "syncledger."):
    if not _module.name.endswith(".__main__"):  # that one runs the command line
        importlib.import_module(_module.name)

# The plugin by module, whether or not its entry point is installed (when it is not, this
# process has imported the plugin unrewritten, which pytest warns about); plugins that only slow
# an inner run down (hypothesis imports itself afresh in each) left out.
FLAGS = (
    "-W",
    "ignore::pytest.PytestAssertRewriteWarning",
    "-p",
    "no:syncledger",
    "-p",
    "syncledger.pytest_plugin",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
)


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # exit code 2 (bad input) is not a Ctrl-C of the outer run
    return pytester.runpytest_inprocess(*FLAGS, *args, no_reraise_ctrlc=True)
