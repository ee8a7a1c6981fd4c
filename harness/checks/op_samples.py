"""The calls the op table is derived from, the same on a GPU and on the emulated device: PyTorch's
OpInfo database (`op_db`: each op's first samples, one dtype, its in-place variant and a
backward on the first sample), the planted-sync catalogue and the real programs.

A body is one call to run twice (a warm-up, then the one observed). Samples are made lazily,
each op's under a fixed seed, so a time-boxed run stops between ops. The OpInfo database ships
with PyTorch's tests (`torch.testing._internal`, which imports `expecttest`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

CUDA = torch.device("cuda")
# the dtype each op is sampled in: the first of these its CUDA kernels take
_DTYPES = (torch.float32, torch.int64, torch.bool, torch.float64, torch.complex64)


@dataclass(frozen=True)
class Body:
    source: str  # "opinfo", "catalogue" or "program"
    name: str  # unique: e.g. "opinfo:add/0", "opinfo:add/0/backward", "catalogue:item"
    run: Callable[[], object]


def _dtype(op: Any) -> torch.dtype | None:
    supported = op.supported_dtypes("cuda")
    return next((d for d in _DTYPES if d in supported), None)


def _op_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _backward(out: Any) -> None:
    leaves = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    grads = [t for t in leaves if t.requires_grad and t.is_floating_point()]
    if grads:
        torch.autograd.backward([t.sum() for t in grads])


def _call(fn: Callable[..., Any], sample: Any) -> Callable[[], object]:
    return lambda: fn(sample.input, *sample.args, **sample.kwargs)


def _clone_input(sample: Any) -> Any:
    return sample.input.clone() if isinstance(sample.input, torch.Tensor) else sample.input


def opinfo_ops(only: set[str] | None = None) -> list[tuple[str, Any, torch.dtype]]:
    """(name, OpInfo, dtype) of every op of the OpInfo database that has a CUDA dtype, or of those
    in `only` (as "opinfo:NAME")."""
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        dtype, name = _dtype(op), _op_name(op)
        if dtype is not None and (only is None or f"opinfo:{name}" in only):
            out.append((name, op, dtype))
    return out


def opinfo_bodies(name: str, op: Any, dtype: torch.dtype, per_op: int) -> list[Body]:
    """One op's bodies, its samples made now under a fixed seed (none where they cannot be)."""
    torch.manual_seed(0)
    try:
        samples = list(itertools.islice(op.sample_inputs(CUDA, dtype), per_op))
        grad_sample = (
            next(iter(op.sample_inputs(CUDA, dtype, requires_grad=True)), None)
            if op.supports_autograd and dtype.is_floating_point
            else None
        )
    except Exception:
        return []
    bodies = [Body("opinfo", f"opinfo:{name}/{i}", _call(op, s)) for i, s in enumerate(samples)]
    inplace = op.inplace_variant
    if inplace is not None and samples:
        s = samples[0]
        bodies.append(
            Body(
                "opinfo",
                f"opinfo:{name}/0/inplace",
                lambda s=s, f=inplace: f(_clone_input(s), *s.args, **s.kwargs),
            )
        )
    if grad_sample is not None:
        forward = _call(op, grad_sample)
        bodies.append(Body("opinfo", f"opinfo:{name}/0/backward", lambda f=forward: _backward(f())))
    return bodies


def catalogue_bodies() -> list[Body]:
    from syncledger.catalogue import CASES, make_inputs

    out = []
    for case in CASES:
        inputs = make_inputs(CUDA)
        if case.setup is not None:
            case.setup(inputs, CUDA)
        out.append(
            Body("catalogue", f"catalogue:{case.name}", lambda c=case, i=inputs: c.body(i, CUDA))
        )
    return out


def program_bodies(kind: str) -> list[Body]:
    """The real programs that run here (`kind` "cuda" or "emu"), each prepared once."""
    from harness.programs.suite import runnable

    return [Body("program", f"program:{p.name}", p.prepare(CUDA)) for p in runnable(kind)]
