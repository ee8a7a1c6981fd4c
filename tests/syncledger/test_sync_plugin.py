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


DEVICE_FIXTURE_TESTS = """
import pytest, torch

@pytest.fixture
def device():  # as CPU-CI suites pick their device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")

@pytest.mark.max_syncs(0)
def test_planted(device):
    int(torch.arange(3, device=device).sum())

def test_ledger_first(sync_ledger, device):
    int(torch.arange(3, device=device).sum())
    assert sync_ledger.count() == 1

def test_ledger_last(device, sync_ledger):
    int(torch.arange(3, device=device).sum())
    assert sync_ledger.count() == 1

class TestSetUp:
    def setup_method(self):
        self.x = torch.arange(3, device="cuda")

    @pytest.mark.max_syncs(1)
    def test_reads_once(self):
        int(self.x.sum())
"""


def test_set_up_runs_on_the_device_whatever_the_fixture_order(pytester: pytest.Pytester) -> None:
    """A device fixture written the usual way gets the ledger's device, before or after the
    ledger's fixture; a set-up method may make device tensors; the planted sync fails."""
    pytester.makepyfile(test_order=DEVICE_FIXTURE_TESTS)
    result = run_inner(pytester)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*_ test_planted _*", "1 host-device syncs, budget 0:", "  - d2h_read int at *"]
    )


CPU_ONLY_TESTS = """
import pytest, torch

@pytest.mark.max_syncs(0)
def test_budget_on_the_cpu():
    int(torch.arange(3, device="cpu").sum())

def test_ledger_on_the_cpu(sync_ledger):
    torch.arange(3).tolist()

@pytest.mark.max_syncs(0)
def test_budget_on_the_device():
    torch.arange(3, device="cuda") + 1
"""


def test_a_budget_that_measured_nothing_is_reported(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cpu=CPU_ONLY_TESTS)
    warned = run_inner(pytester)
    warned.assert_outcomes(passed=3, warnings=2)
    warned.stdout.fnmatch_lines(
        [
            "test_cpu.py::test_budget_on_the_cpu",
            "  test_cpu.py:*: SyncMeasuredNothingWarning: max_syncs measured nothing: *",
            "test_cpu.py::test_ledger_on_the_cpu",
            "  test_cpu.py:*: SyncMeasuredNothingWarning: sync_ledger measured nothing: *",
        ]
    )
    strict = run_inner(pytester, "--sync-strict")
    strict.assert_outcomes(passed=1, failed=2)
    strict.stdout.fnmatch_lines(
        ["*_ test_budget_on_the_cpu _*", "max_syncs measured nothing: no tensor was made on *"]
    )


SCOPED_TESTS = """
import pytest, torch
import mypkg

@pytest.mark.max_syncs(0, within=["mypkg"])
def test_scaffolding_is_not_counted():
    x = torch.tensor([3, 1], device="cuda")
    assert x.tolist() == [3, 1]

@pytest.mark.max_syncs(0, within=["mypkg"])
def test_the_package_is():
    mypkg.longest(torch.tensor([3, 1], device="cuda"))

@pytest.mark.max_syncs(1, within=["mypkg/__init__.py"])
def test_a_path_from_the_rootdir():
    mypkg.longest(torch.tensor([3, 1], device="cuda"))

@pytest.mark.max_syncs(0, within=["nosuchpkg"])
def test_an_unknown_package():
    pass

@pytest.mark.max_syncs(0, kinds=[])
def test_no_kinds():
    pass
"""


def test_within_counts_only_the_named_code(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("mypkg").joinpath("__init__.py").write_text(
        "def longest(x):\n    return int(x.max())\n"
    )
    tests = pytester.makepyfile(test_scoped=SCOPED_TESTS).read_text().splitlines()
    call = tests.index('    mypkg.longest(torch.tensor([3, 1], device="cuda"))') + 1
    # the sites as the emulated device names them, on any machine
    result = run_inner(pytester, "--sync-device", "emu")
    result.assert_outcomes(passed=2, failed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_the_package_is _*",
            "1 host-device syncs within mypkg, budget 0:",
            "  - d2h_read int at *mypkg/__init__.py:2 in longest [[]region -[]]",
            f"      called from *test_scoped.py:{call} in test_the_package_is",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at setup of test_an_unknown_package _*",
            "max_syncs marker: within: 'nosuchpkg' is not an importable module or package *",
            "*_ ERROR at setup of test_no_kinds _*",
            "max_syncs marker: sync kinds: the list is empty, so nothing would be counted; *",
        ]
    )


def test_what_the_emulated_device_cannot_run_is_one_line_at_the_test(
    pytester: pytest.Pytester,
) -> None:
    path = pytester.makepyfile(
        test_limit="""
        import pytest, torch

        @pytest.mark.max_syncs(0)
        def test_mixes_devices():
            torch.arange(3, device="cuda") + torch.arange(3)
        """
    )
    line = (
        path.read_text().splitlines().index('    torch.arange(3, device="cuda") + torch.arange(3)')
    )
    result = run_inner(pytester, "--sync-device", "emu")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_mixes_devices _*",
            f"*test_limit.py:{line + 1}: *expected all tensors on the same device*",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "door.py" not in result.stdout.str()
