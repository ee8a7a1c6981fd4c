"""A tree that needs what the loader does not provide is one line naming where, never a cell's
outcome: an attribute a handed object lacks, a module nothing stands in for, a failure inside
the harness's side of a call, a Triton kernel no stand-in covers."""

from __future__ import annotations

import pytest

from harness.upstream import kernels
from harness.upstream.handed import Handed
from harness.upstream.loader import MissingAttribute, TreeDrift, drift_of

TREE_FILE = "/somewhere/sglang/srt/layers/attention/probe.py"


def _tree_function(source: str):
    """A function whose frames read as the tree's (its file lies under sglang/)."""
    scope: dict = {}
    exec(compile(source, TREE_FILE, "exec"), scope)
    return scope["probe"]


def _raised(fn, *args) -> Exception:
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


def test_a_handed_object_names_the_line_that_reads_what_it_lacks() -> None:
    probe = _tree_function("def probe(runner):\n    return runner.page_size\n")
    exc = _raised(probe, Handed("model_runner", device="meta"))
    assert isinstance(exc, MissingAttribute)
    assert str(exc).startswith("srt/layers/attention/probe.py:2 probe reads model_runner.")
    # upstream's own getattr(x, name, default) still sees the attribute absent
    defaulted = _tree_function("def probe(runner):\n    return getattr(runner, 'x', 5)\n")
    assert defaulted(Handed("model_runner")) == 5


def test_an_exception_is_drift_only_where_the_harness_side_raised_it() -> None:
    upstream_assert = _tree_function("def probe(x):\n    assert x is not None\n")
    assert drift_of(_raised(upstream_assert, None)) is None  # upstream's own outcome
    calls_stand_in = _tree_function("def probe(fn):\n    return fn(None, None, d_v=1)\n")
    drift = drift_of(_raised(calls_stand_in, kernels.sparse_attention))
    assert isinstance(drift, TreeDrift) and "kernels.py" in str(drift)
    assert "probe.py:2" in str(drift)  # the tree's line that called in


def test_a_missing_module_and_an_unstood_triton_launch_are_drift() -> None:
    importer = _tree_function("def probe():\n    import no_such_compiled_module\n")
    drift = drift_of(_raised(importer))
    assert "probe.py:2" in str(drift) and "no_such_compiled_module" in str(drift)
    launch = _tree_function("def probe(run):\n    run()\n")
    scope: dict = {}
    exec(
        compile("def run():\n    raise AssertionError('no GPU')\n", "/x/triton/jit.py", "exec"),
        scope,
    )
    assert "a Triton kernel failed" in str(drift_of(_raised(launch, scope["run"])))
