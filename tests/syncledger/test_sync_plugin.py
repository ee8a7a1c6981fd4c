"""The pytest plugin on this machine: tests with CUDA-style code run on the emulated device
when there is no GPU, the header says so, and --sync-device forces a device."""

from __future__ import annotations

import re

import pytest
import torch

from tests.support.pytester_runs import run_inner

pytest_plugins = ["pytester"]
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")

CUDA_STYLE_TESTS = """
import pytest, torch

def test_fixture(sync_ledger):
    x = torch.arange(3, device="cuda")
    assert x.tolist() == [0, 1, 2]
    assert sync_ledger.count() == 1

@pytest.mark.max_syncs(1)
def test_marker_within_budget():
    assert torch.arange(3, device="cuda").sum().item() == 3

@pytest.mark.max_syncs(0)
def test_marker_over_budget():
    torch.arange(3, device="cuda").sum().item()
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(CUDA_STYLE_TESTS)
    return run_inner(pytester, *args)


@no_gpu
def test_cuda_style_tests_run_on_the_emulated_device(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "sync ledger: tests using sync_ledger or max_syncs run on CUDA when this machine has "
            "a GPU, else on the emulated device*; the summary says which",
            "*1 host-device syncs, budget 0*",
            "sync ledger: 3 tests ran on the emulated device (CPU; code that says 'cuda' runs there)",
        ]
    )
    assert result.stdout.str().count("sync ledger:") == 2


def test_forced_emulated_device(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--sync-device", "emu")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["sync ledger: *emulated device*"])


@no_gpu
def test_forced_cuda_without_cuda_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--sync-device", "cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sync-device cuda: cuda was asked for but no CUDA device*"])


HELPER_TESTS = """
import pytest, torch

def total(x):
    return x.sum().item()

@pytest.mark.max_syncs(0)
def test_over_budget_in_a_helper():
    total(torch.arange(3, device="cuda"))
"""


def test_over_budget_frames_are_the_tests_own(pytester: pytest.Pytester) -> None:
    """The marker's report: the sync, then its callers from the test on; no runner frames
    (pytest, pluggy), no traceback through the plugin."""
    path = pytester.makepyfile(test_helper=HELPER_TESTS)
    lines = path.read_text().splitlines()
    site = lines.index("    return x.sum().item()") + 1
    call = lines.index('    total(torch.arange(3, device="cuda"))') + 1
    result = run_inner(pytester, "--sync-device", "emu")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "1 host-device syncs, budget 0:",
            f"  - d2h_read item at *test_helper.py:{site} in total [[]region -[]]",
            f"      called from *test_helper.py:{call} in test_over_budget_in_a_helper",
        ]
    )
    assert not re.search(r"_pytest/|pluggy/|pytest_plugin\.py", result.stdout.str())
