"""The ledger never changes what a program does: every interceptor passes any call PyTorch
accepts through unchanged (result, error, compiled graph), and a failure to classify is recorded
and warned about, never raised. Checked on CPU with the CUDA interceptors installed for real."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from syncledger import SyncKind, SyncLedger, classify, hooks
from tests.support.sync_fakes import StubTensor

_REPO = str(Path(__file__).resolve().parents[2])
_REPO_ON_PATH = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([_REPO, os.environ.get("PYTHONPATH", "")]),
}


@pytest.fixture
def interceptors() -> Iterator[None]:
    """The CUDA interceptors installed in this process for the test, then taken out again."""
    saved = {(owner, name): getattr(owner, name) for owner, name, _ in hooks._patches()}
    was = hooks._installed
    hooks._installed = False
    hooks.install()
    try:
        yield
    finally:
        for (owner, name), fn in saved.items():
            setattr(owner, name, fn)
        hooks.PATCHED.clear()
        hooks._installed = was


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.device == b.device
            and a.shape == b.shape
            and a.stride() == b.stride()
            and torch.equal(a, b)
        )
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _inputs() -> dict[str, torch.Tensor]:
    t = torch.arange(12, dtype=torch.float32).view(3, 4)
    return {"t": t, "i": torch.tensor([0, 2]), "m": t > 5, "s": torch.tensor(3.0)}


# Each call as a user writes it: every overload and keyword PyTorch accepts, positional bools,
# and calls PyTorch itself rejects (they must fail the same way under the ledger).
CALLS: dict[str, Callable[[dict[str, torch.Tensor]], Any]] = {
    "to_copy_kw": lambda x: x["t"].to(copy=True, dtype=torch.float64, device="cpu"),
    "to_dtype_positional_bools": lambda x: x["t"].to(torch.float64, True, True),
    "to_device_dtype_nb": lambda x: x["t"].to("cpu", torch.float16, non_blocking=True),
    "to_other": lambda x: x["t"].to(x["i"]),
    "to_other_copy": lambda x: x["t"].to(x["i"], copy=True),
    "to_memory_format": lambda x: x["t"].to(device="cpu", memory_format=torch.contiguous_format),
    "to_same_returns_self": lambda x: x["t"].to("cpu") is x["t"],
    "to_nothing": lambda x: x["t"].to(),
    "to_bad_kw": lambda x: x["t"].to(device="cpu", bogus=1),
    "to_bad_device": lambda x: x["t"].to("nowhere"),
    "cpu_memory_format": lambda x: x["t"].cpu(memory_format=torch.contiguous_format),
    "cpu_positional": lambda x: x["t"].cpu(torch.preserve_format),
    "copy_kw": lambda x: torch.empty(3, 4).copy_(src=x["t"], non_blocking=True),
    "copy_positional": lambda x: torch.empty(3, 4).copy_(x["t"], True),
    "copy_broadcast": lambda x: torch.empty(3, 4).copy_(torch.ones(4)),
    "copy_bad": lambda x: torch.empty(3, 4).copy_(5),
    "tensor_data_kw": lambda x: torch.tensor(data=[1, 2], dtype=torch.int32),
    "tensor_nested": lambda x: torch.tensor([[1.5], [2.5]], requires_grad=True),
    "tensor_of_tensor": lambda x: torch.tensor(x["s"]),
    "as_tensor_positional": lambda x: torch.as_tensor([1, 2], torch.float32, "cpu"),
    "as_tensor_tensor": lambda x: torch.as_tensor(x["t"], dtype=torch.float64),
    "new_tensor_kw": lambda x: x["t"].new_tensor([1, 2], dtype=torch.int64, requires_grad=False),
    "getitem_index": lambda x: x["t"][x["i"]],
    "getitem_mask": lambda x: x["t"][x["m"]],
    "getitem_tuple": lambda x: x["t"][1:, [0, 3]],
    "setitem_scalar": lambda x: x["t"].clone().__setitem__(x["i"], 7.0),
    "item": lambda x: x["s"].item(),
    "tolist": lambda x: x["t"].tolist(),
    "bool": lambda x: bool(x["s"]),
    "format": lambda x: f"{x['s']:.2f}",
    "repr": lambda x: repr(x["t"]),
    "contains": lambda x: 3.0 in x["t"],
    "nonzero_as_tuple": lambda x: x["t"].nonzero(as_tuple=True),
    "unique_all_kw": lambda x: torch.unique(
        x["t"].round(), sorted=False, return_inverse=True, return_counts=True, dim=0
    ),
    "unique_positional": lambda x: torch.unique(x["t"], True, True, False, 1),
    "eigh_uplo": lambda x: torch.linalg.eigh(torch.eye(3) * 2, UPLO="U"),
    "repeat_interleave_output_size": lambda x: torch.repeat_interleave(
        torch.tensor([1, 2]), output_size=3
    ),
    "one_hot": lambda x: torch.nn.functional.one_hot(torch.tensor([0, 2]), num_classes=4),
    "allclose_kw": lambda x: torch.allclose(x["t"], x["t"] + 1e-9, rtol=0, atol=1e-6),
    "histc": lambda x: torch.histc(x["t"], bins=4, min=0, max=12),
    "masked_fill_": lambda x: x["t"].clone().masked_fill_(x["m"], value=0.0),
}


def _outcome(fn: Callable[[dict[str, torch.Tensor]], Any]) -> tuple[str, Any]:
    torch.manual_seed(0)
    try:
        return "ok", fn(_inputs())
    except Exception as exc:
        return "raised", (type(exc), str(exc))


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")  # torch's own, for one call
@pytest.mark.parametrize("name", list(CALLS))
def test_every_call_passes_through_unchanged(interceptors: None, name: str) -> None:
    fn = CALLS[name]
    saved = hooks._installed
    # the plain run: the originals, as PyTorch has them
    plain = {}
    for owner, attr in hooks.PATCHED:
        plain[(owner, attr)] = getattr(owner, attr)
        setattr(owner, attr, inspect.unwrap(getattr(owner, attr)))
    expected = _outcome(fn)
    for (owner, attr), wrapper in plain.items():
        setattr(owner, attr, wrapper)
    assert saved
    with SyncLedger() as led, warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no classification may fail either
        got = _outcome(fn)
    assert got[0] == expected[0], f"{name}: {got} != {expected}"
    assert _same(got[1], expected[1]), f"{name}: {got[1]!r} != {expected[1]!r}"
    assert [e for e in led.events if e.kind is SyncKind.UNCLASSIFIED] == []


def test_wrappers_keep_the_wrapped_callables_identity(interceptors: None) -> None:
    for owner, attr in hooks.PATCHED:
        wrapper = getattr(owner, attr)
        assert wrapper.__name__ == wrapper.__wrapped__.__name__, attr
        assert wrapper.__doc__ == wrapper.__wrapped__.__doc__, attr


def test_a_failing_rule_is_recorded_unclassified_and_warned_once() -> None:
    class Broken(StubTensor):
        def is_pinned(self) -> bool:
            raise RuntimeError("pinned-ness unknown")

    calls: list[bool] = []
    copy_ = hooks._wrap_copy(lambda self, src, nb: calls.append(nb) or "result")
    classify._warned_ops.discard("copy_")
    with SyncLedger() as led, pytest.warns(RuntimeWarning, match="could not classify") as seen:
        first = copy_(StubTensor(True), Broken(False), False)
        second = copy_(StubTensor(True), Broken(False), False)
    assert (first, second, calls) == ("result", "result", [False, False])
    assert [e.kind for e in led.events] == [SyncKind.UNCLASSIFIED] * 2
    assert len([w for w in seen if "could not classify" in str(w.message)]) == 1


def test_compiled_code_is_traced_as_without_the_ledger(interceptors: None) -> None:
    """torch.compile sees PyTorch's own callables through the interceptors: no graph break."""

    def f(t: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        u = torch.tensor([1.0, 2.0, 3.0, 4.0]).to(t.dtype)
        return (t[i] + u).to(torch.float64).cpu() * torch.as_tensor(2.0)

    x, i = _inputs()["t"], torch.tensor([0, 2])
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    with SyncLedger():
        out = compiled(x, i)
    assert _same(out, f(x, i))


def test_importing_the_ledger_asks_for_no_device() -> None:
    """Asking for a CUDA device starts the CUDA driver, after which no child the program forks
    can use CUDA: importing the ledger (or the DP ranks' code, which their fork server
    imports) must not ask. In a fresh interpreter, with torch.cuda's queries watched."""
    code = (
        "import torch, torch.cuda\n"
        "asked = []\n"
        "for name in ('is_available', 'device_count', 'init', 'current_device'):\n"
        "    real = getattr(torch.cuda, name)\n"
        "    def spy(*a, _real=real, _name=name, **k):\n"
        "        asked.append(_name)\n"
        "        return _real(*a, **k)\n"
        "    setattr(torch.cuda, name, spy)\n"
        "import syncledger, harness.dp.job\n"
        "for name in syncledger.__all__:\n"  # each public name imports its module
        "    getattr(syncledger, name)\n"
        "print(asked)\n"
    )
    env = {**_REPO_ON_PATH, "SYNCLEDGER_NVTX": "torch"}  # the NVTX backend that could ask
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _pytest_with_the_plugin(tests: str, cwd: Path) -> subprocess.CompletedProcess:
    """`tests` run by pytest in a fresh interpreter, with the plugin loaded by module as its
    entry point would load it; the last line printed says whether torch was imported."""
    (cwd / "test_it.py").write_text(tests)
    code = (
        "import sys, pytest\n"
        "flags = ['-q', '-p', 'no:cacheprovider', '-p', 'no:syncledger']\n"
        "rc = pytest.main([*flags, '-p', 'syncledger.pytest_plugin', 'test_it.py'])\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
        "sys.exit(rc)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=_REPO_ON_PATH,
        capture_output=True,
        text=True,
        timeout=300,
    )


PLAIN_TESTS = """
import sys

def test_plain():
    assert "torch" not in sys.modules
"""


FORKING_TESTS = """
import multiprocessing as mp
import torch

def _child(q):
    q.put(float(torch.ones(2, device="cuda").sum().item()))

def test_a_forked_child_uses_cuda():
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0 and q.get(timeout=5) == 2.0

def test_then_the_ledger(sync_ledger):
    torch.ones(2, device="cuda").sum().item()
    assert sync_ledger.count() == 1
"""


@pytest.mark.gpu
def test_a_pytest_run_can_fork_cuda_children_until_a_test_uses_the_ledger(tmp_path: Path) -> None:
    """On a GPU, a suite that forks a child using CUDA keeps working with the plugin loaded:
    nothing in the parent starts the CUDA driver before a test uses the ledger."""
    done = _pytest_with_the_plugin(FORKING_TESTS, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sync ledger: 1 test ran on CUDA" in done.stdout


def test_a_pytest_run_that_never_uses_the_ledger_imports_no_torch(tmp_path: Path) -> None:
    """pytest loads the plugin in every run of an environment that has the harness: a suite
    that never uses the ledger pays no torch import and starts no CUDA driver, from the
    plugin's loading to its summary."""
    done = _pytest_with_the_plugin(PLAIN_TESTS, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert done.stdout.splitlines()[-1] == "torch imported: False"
