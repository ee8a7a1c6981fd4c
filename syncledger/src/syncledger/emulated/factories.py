"""Factories that PyTorch's own composites call: made on the emulated device, with real values.

A factory has no tensor argument, so it never reaches a tensor's door: SDPA's math path makes its
causal mask with `ones(..., query.options())`, and those options name the query's C++ device,
`meta`, whose kernels make shapes without values. So while the emulated device is active, the
Meta kernel of every aten factory (each overload with a `device` argument, no tensor argument
and one tensor result, found from the schemas of the installed PyTorch) runs the op on the CPU
and wraps the result; on a CPU-only build, where the emulated device claims `"cuda"`, so does
its CUDA kernel (nested Python code that says `device=t.device` asks for `cuda:0`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

from syncledger.emulated.capture import CAPTURE, record
from syncledger.emulated.tensor import EmuTensor

_CPU = torch.device("cpu")
_lib: torch.library.Library | None = None
_keys: set[str] = set()


def _is_factory(schema: Any) -> bool:
    args = schema.arguments
    return (
        any(a.name == "device" for a in args)
        and not any("Tensor" in str(a.type) for a in args)
        and len(schema.returns) == 1
        and str(schema.returns[0].type) == "Tensor"
    )


@cache
def factories() -> tuple[tuple[str, Any], ...]:
    """("name.overload", op) of every aten factory of this PyTorch."""
    names = {n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("aten::")}  # fmt: skip
    out = []
    for name in sorted(names):
        for schema in torch._C._jit_get_schemas_for_operator(f"aten::{name}"):
            if _is_factory(schema):
                overload = schema.overload_name or "default"
                op = getattr(getattr(torch.ops.aten, name), overload)
                out.append((f"{name}.{overload}" if schema.overload_name else name, op))
    return tuple(out)


def _values(op: Any, args: tuple, kwargs: dict) -> torch.Tensor:
    out = op(*args, **kwargs)
    # autograd's zero gradient (`_efficientzerotensor`) holds no memory: real zeros here
    return torch.zeros(out.shape, dtype=out.dtype) if out._is_zerotensor() else out


def _on_host(op: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        kwargs["device"] = _CPU
        kwargs.pop("pin_memory", None)
        out = EmuTensor(_values(op, args, kwargs))
        if CAPTURE.steps is not None:  # a graph makes its factories' values again
            record(lambda: _values(op, args, kwargs), out)
        return out

    return kernel


# Many factories already have a Python meta kernel (torch._meta_registrations). PyTorch lets a
# library override it only when asked (the default flipped between releases), and restores it
# when the library is destroyed.
_OVERRIDE = (
    {"allow_override": True}
    if "allow_override" in inspect.signature(torch.library.Library.impl).parameters
    else {}
)


def install(cuda_too: bool) -> None:
    """Route the Meta (and with `cuda_too` the CUDA) factory kernels to the emulated device,
    until `uninstall`."""
    global _lib
    if _lib is None:
        _lib = torch.library.Library("aten", "IMPL")
    for key in ("Meta", "CUDA") if cuda_too else ("Meta",):
        if key not in _keys:
            for name, op in factories():
                _lib.impl(name, _on_host(op), key, **_OVERRIDE)
            _keys.add(key)


def uninstall() -> None:
    global _lib
    if _lib is not None:
        _lib._destroy()
        _lib = None
        _keys.clear()
