"""The test suite's own rules: every marker pyproject.toml declares marks a test, a marker
nobody declared is an error, `gpu` tests skip themselves without CUDA, and the modules with
`slow` tests run first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
PYTEST_INI = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
GPU_TEST = """
import pytest

@pytest.mark.gpu
def test_needs_cuda():
    import torch
    assert torch.cuda.is_available()
"""


def test_every_declared_marker_marks_a_test() -> None:
    declared = {re.split(r"[:(]", line, maxsplit=1)[0].strip() for line in PYTEST_INI["markers"]}
    used = {
        name
        for path in Path(__file__).parent.rglob("*.py")
        for name in re.findall(r"@pytest\.mark\.(\w+)", path.read_text())
    }
    assert declared - used == set(), "declared in pyproject.toml, marking no test"


def _project_pytester(pytester: pytest.Pytester) -> None:
    """A pytester folder with this project's pytest settings and test set-up."""
    pytester.makepyprojecttoml((REPO / "pyproject.toml").read_text())
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())


def test_an_undeclared_marker_is_an_error(pytester: pytest.Pytester) -> None:
    _project_pytester(pytester)
    pytester.makepyfile("import pytest\n\n@pytest.mark.gpu_only\ndef test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*'gpu_only' not found in `markers` configuration option*"])


def test_gpu_tests_skip_without_cuda(pytester: pytest.Pytester) -> None:
    _project_pytester(pytester)
    pytester.makepyfile(GPU_TEST)
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "-rs")
    if torch.cuda.is_available():
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*needs a CUDA device*"])


def test_modules_with_slow_tests_run_first(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    order = [item.path in slow for item in items]
    assert order == sorted(order, reverse=True)
