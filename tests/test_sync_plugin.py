"""The pytest plugin on this machine: tests with CUDA-style code run on the emulated device
when there is no GPU, the header says so, and --sync-device forces a device."""

from __future__ import annotations

import pytest
import torch

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
    # load the plugin early by module, whether or not its entry point is installed
    plugin = ("-p", "no:harness_sync", "-p", "harness.sync.pytest_plugin")
    return pytester.runpytest_inprocess(*plugin, "-p", "no:cacheprovider", *args)


@no_gpu
def test_cuda_style_tests_run_on_the_emulated_device(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "sync ledger: tests using sync_ledger or max_syncs run on the emulated device*",
            "*1 host-device syncs, budget 0*",
        ]
    )
    assert result.stdout.str().count("sync ledger:") == 1


def test_forced_emulated_device(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--sync-device", "emu")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["sync ledger: *emulated device*"])


@no_gpu
def test_forced_cuda_without_cuda_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--sync-device", "cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sync-device cuda: cuda was asked for but no CUDA device*"])
