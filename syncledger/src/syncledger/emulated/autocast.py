"""CUDA autocast on the emulated device.

`torch.autocast("cuda")` casts in the dispatcher, for tensors whose C++ device is CUDA; emulated
tensors are `meta` there, so the dispatcher leaves them alone and a mixed-precision program would
run in float32. The emulated device's torch-function mode applies the same policy instead, by
op name, before the op runs (above autograd, as the dispatcher does, so backward casts back):
lower-precision ops get the autocast dtype, float32 ops float32, `fp32_set_opt_dtype` ops a
float32 `dtype`, promote ops the widest input type. The op lists are ATen's own, read from the
`autocast_mode.h` that ships with the installed PyTorch, so they follow its version. Only
emulated floating tensors other than float64 are cast, as CUDA casts only CUDA tensors.

Composites that PyTorch implements in C++ and that only call listed ops inside (cross_entropy:
log_softmax and nll_loss) are cast by what those calls would do (`_COMPOSITES`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

from syncledger.emulated.tensor import EmuTensor

_HEADER = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "autocast_mode.h")
_LISTS = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower",
    "AT_FORALL_FP32": "fp32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "fp32_set_opt_dtype",
    "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE": "fp32_set_opt_dtype",  # norm: fp32_append_dtype
    "AT_FORALL_PROMOTE": "promote",
}
_COMPOSITES = {"cross_entropy": "fp32"}
_NOT_ELIGIBLE = (torch.float64,)


def parse_header(text: str) -> dict[str, str]:
    """Op name -> cast policy, from the text of ATen's autocast_mode.h."""
    policy: dict[str, str] = {}
    for macro, kind in _LISTS.items():
        match = re.search(rf"#define {macro}\(_\)(.*?)(?:\n\s*\n|\n#)", text, re.S)
        if match is None:
            continue
        for name in re.findall(r"_\(\s*(?:ADD_NS\()?(\w+)", match.group(1)):
            policy.setdefault(name, kind)
    return policy


@cache
def policy() -> dict[str, str]:
    """The installed PyTorch's CUDA autocast policy by op name (empty without its header)."""
    try:
        with open(_HEADER, encoding="utf-8") as f:
            table = parse_header(f.read())
    except OSError:
        return {}
    return {**table, **_COMPOSITES} if table else {}


def available() -> bool:
    return bool(policy())


def _eligible(x: Any) -> bool:
    return isinstance(x, EmuTensor) and x.is_floating_point() and x.dtype not in _NOT_ELIGIBLE


def _cast_all(value: Any, dtype: torch.dtype) -> Any:
    if _eligible(value) and value.dtype != dtype:
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_all(v, dtype) for v in value)
    return value


def _widest(args: tuple, kwargs: dict) -> torch.dtype | None:
    found = [a.dtype for a in (*args, *kwargs.values()) if _eligible(a)]
    return max(found, key=lambda d: torch.finfo(d).bits) if found else None


def _cast_to(dtype: torch.dtype | None, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    if dtype is None:
        return args, kwargs
    return _cast_all(args, dtype), {k: _cast_all(v, dtype) for k, v in kwargs.items()}


def _lower(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    return _cast_to(torch.get_autocast_dtype("cuda"), args, kwargs)


def _fp32(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    return _cast_to(torch.float32, args, kwargs)


def _fp32_dtype(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    if kwargs.get("dtype") is None and args and _eligible(args[0]):
        kwargs = {**kwargs, "dtype": torch.float32}
    return args, kwargs


def _promote(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    return _cast_to(_widest(args, kwargs), args, kwargs)


_CASTS: dict[str, Callable[[tuple, dict], tuple[tuple, dict]]] = {
    "lower": _lower,
    "fp32": _fp32,
    "fp32_set_opt_dtype": _fp32_dtype,
    "promote": _promote,
}


def cast_args(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments a call of torch function `name` runs with under CUDA autocast (unchanged
    when autocast is off, the op is not listed, or the call writes into `out=`)."""
    if not torch.is_autocast_enabled("cuda"):
        return args, kwargs
    kind = policy().get(name.strip("_").removeprefix("r") if name.startswith("__") else name)
    if kind is None or "out" in kwargs:
        return args, kwargs
    return _CASTS[kind](args, kwargs)
