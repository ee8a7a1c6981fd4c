"""Compiled code on upstream's paths, replaced at the call by torch stand-ins that count calls.

Upstream's Python runs unedited around each stand-in. A stand-in names what it replaces by its
Python name (a function, or ``Class.method``); the definition is found in the tree wherever it
lives (kernel modules moved between releases) and every module binding of it is replaced. A
Triton kernel's stand-in computes on the emulated device's host values, as a kernel launch
would on the GPU: no host wait; on CUDA the real kernel runs. After the cells run, a stand-in
found in the tree but never called is an error (the paths no longer go where they did), and a
required one whose definition is missing means the tree drifted beyond what the loader knows.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from harness.upstream import kernels as K
from harness.upstream.loader import TreeDrift, inert_module
from syncledger import EmuTensor

# where compiled code's Python wrappers live in the releases and commits read so far
_SEARCH = ("jit_kernel", "kernels", "srt/layers")


@dataclass(frozen=True)
class StandIn:
    label: str  # the compiled code, in words
    target: str  # its Python name upstream: "func" or "Class.method"
    body: Callable[..., Any]  # body(original, *args, **kwargs); a classmethod gets cls first
    triton: bool = False  # a Triton kernel: stood in on the emulated device, run on CUDA
    required: bool = True  # False: only some commits have it
    launch: bool = False  # a @triton.jit kernel, called as ``kernel[grid](...)``


class _Launch:
    """A Triton kernel's stand-in: ``kernel[grid](*args)`` calls ``fn(grid, *args)``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.fn(grid, *args, **kwargs)


@dataclass(frozen=True)
class ModuleStandIn:
    """A compiled extension that upstream imports at call time: a module of counted functions."""

    label: str
    module: str
    functions: dict[str, Callable[..., Any]]


def _to_host(x: Any) -> Any:
    if isinstance(x, EmuTensor):
        return x._elem
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_to_host(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_host(v) for k, v in x.items()}
    return x


def _to_device(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and not isinstance(x, EmuTensor):
        return EmuTensor(x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_to_device(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_to_device(v) for v in x)
    for f in getattr(type(x), "__struct_fields__", ()):  # a msgspec Struct
        setattr(x, f, _to_device(getattr(x, f)))
    return x


def on_host(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn` on the host values behind emulated tensors, its tensors handed back as emulated
    ones: a kernel reads and writes device memory without a host wait."""
    return _to_device(fn(*_to_host(args), **_to_host(kwargs)))


def _torch_twin(original: Any, cls: type, *args: Any, **kwargs: Any) -> Any:
    # a kernel class's own torch twin, run where the kernel runs (it may read values: on the
    # host that waits for nothing)
    return on_host(cls.torch, *args, **kwargs)


def _flashmla(original: Any, *args: Any, **kwargs: Any) -> Any:
    return K.flashmla(*args, **kwargs)


STAND_INS: tuple[StandIn, ...] = (
    # 0.5.23 wraps the compiled flash_mla package in a module of its own; before, sgl_kernel's
    # flash_mla module (MODULE_STAND_INS) is called directly
    StandIn("FlashMLA scheduler metadata", "get_mla_metadata", _flashmla, required=False),
    StandIn(
        "FlashMLA sparse prefill attention",
        "flash_mla_sparse_fwd",
        lambda original, *a, **k: K.sparse_attention(*a, **k),
        required=False,
    ),
    StandIn(
        "compression metadata (Triton)",
        "init_compression_metadata",
        lambda original, *a, **k: on_host(K.compression_metadata, *a, **k),
        triton=True,
    ),
    StandIn("compressor decode planner (tvm-ffi)", "CompressorDecodePlan.generate", K.decode_plan),
    StandIn(
        "compressor prefill planner (tvm-ffi)", "CompressorPrefillPlan.generate", K.prefill_plan
    ),
    StandIn("indexer metadata (tvm-ffi)", "get_paged_mqa_logits_metadata", K.indexer_metadata),
    StandIn("top-k plan (tvm-ffi)", "plan_topk_v2", K.topk_plan),
    # sparse prefill's chunk cache (F10): its Python runs, the kernels it launches stand in
    StandIn(
        "SWA token ids (Triton)",
        "_build_swa_token_ids_kernel",
        K.launch_without_effect,
        triton=True,
        required=False,
        launch=True,
    ),
    StandIn(
        "sparse prefill index combine (Triton)",
        "_combine_topk_swa_indices_kernel",
        K.launch_without_effect,
        triton=True,
        required=False,
        launch=True,
    ),
    StandIn(
        "KV dequantization (Triton)",
        "_dequantize_k_cache_paged_kernel",
        K.launch_without_effect,
        triton=True,
        required=False,
        launch=True,
    ),
    StandIn(
        "prefill causal expansion (Triton)",
        "ExpandPrefillCausally.triton",
        _torch_twin,
        triton=True,
        required=False,
    ),
    StandIn(
        "page table and positions (Triton)",
        "BuildPageTablePositions.triton",
        _torch_twin,
        triton=True,
        required=False,
    ),
    StandIn(
        "causal SWA page indices (Triton)",
        "BuildCausalSwaPageIndices.triton",
        _torch_twin,
        triton=True,
        required=False,
    ),
)
MODULE_STAND_INS: tuple[ModuleStandIn, ...] = (
    ModuleStandIn(
        "FlashMLA scheduler metadata", "sgl_kernel.flash_mla", {"get_mla_metadata": K.flashmla}
    ),
    ModuleStandIn(
        "FlashMLA sparse prefill attention",
        "sgl_kernel.flash_mla",
        {"flash_mla_sparse_fwd": K.sparse_attention},
    ),
    ModuleStandIn(
        "DeepGEMM",
        "deep_gemm",
        {"get_num_sms": K.num_sms, "get_paged_mqa_logits_metadata": K.indexer_metadata_dg},
    ),
)
COMPILED_MODULES = ("sgl_kernel", "deep_gemm")  # what the loader must not import for real


def _definitions(root: Path, names: set[str]) -> dict[str, list[str]]:
    """name -> the modules of the tree that define a function or class of that name (the
    tree's files read once)."""
    pattern = re.compile(r"^(?:def|class) (\w+)\b", re.M)
    found: dict[str, list[str]] = {n: [] for n in names}
    for sub in _SEARCH:
        for path in sorted((root / "sglang" / sub).rglob("*.py")):
            text = path.read_text(errors="replace")
            for name in set(pattern.findall(text)) & names:
                rel = path.relative_to(root).with_suffix("")
                found[name].append(".".join(rel.parts))
    return found


@dataclass
class Installed:
    """The stand-ins in force for one tree, and how often each was called."""

    calls: Counter
    found: dict[str, list[str]]  # stand-in label -> the modules that define it
    real: frozenset[str] = frozenset()  # labels of Triton kernels that run (CUDA), counted

    def check_reached(self) -> None:
        for label, where in self.found.items():
            if where and not self.calls[label]:
                raise TreeDrift(
                    f"stand-in {label!r} ({where[0]}) was never called: the paths no longer "
                    "reach that compiled code"
                )


def _counted(label: str, calls: Counter, body: Callable[..., Any], original: Any):
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        calls[label] += 1
        return body(original, *args, **kwargs)

    return stand_in


def _patch_function(module: ModuleType, name: str, replacement: Callable[..., Any]) -> None:
    original = getattr(module, name)
    for other in list(sys.modules.values()):
        if getattr(other, "__name__", "").startswith("sglang") and isinstance(other, ModuleType):
            for key, value in list(vars(other).items()):
                if value is original:
                    setattr(other, key, replacement)


def _patch_method(cls: type, method: str, label: str, calls: Counter, body: Callable) -> bool:
    raw = cls.__dict__.get(method)
    if raw is None:
        return False
    if isinstance(raw, classmethod):

        def as_class(klass: type, *args: Any, **kwargs: Any) -> Any:
            calls[label] += 1
            return body(raw.__func__, klass, *args, **kwargs)

        setattr(cls, method, classmethod(as_class))
        return True
    else:
        func = raw.__func__ if isinstance(raw, staticmethod) else raw
        setattr(cls, method, staticmethod(_counted(label, calls, body, func)))
    return True


@contextmanager
def compiled_modules(calls: Counter) -> Iterator[None]:
    """The compiled extensions upstream imports, as modules of counted functions (in place
    before the tree loads, removed after). Their other names are inert: imported (CUDA builds
    import more of them at module level), they raise when called."""
    saved = {name: sys.modules.get(name) for name in COMPILED_MODULES}
    made: dict[str, ModuleType] = {}
    for m in MODULE_STAND_INS:
        module = sys.modules[m.module] = made.setdefault(m.module, inert_module(m.module))
        for fname, fn in m.functions.items():
            setattr(module, fname, _counted(m.label, calls, _plain, fn))
        parent, _, leaf = m.module.rpartition(".")
        if parent:
            package = sys.modules[parent] = made.setdefault(parent, inert_module(parent))
            setattr(package, leaf, module)
    try:
        yield
    finally:
        for m in MODULE_STAND_INS:
            sys.modules.pop(m.module, None)
        for name, previous in saved.items():
            if previous is not None:
                sys.modules[name] = previous
            else:
                sys.modules.pop(name, None)


def _plain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def _run_for_real(original: Any, *args: Any, **kwargs: Any) -> Any:
    return original(*args, **kwargs)


def _launch_for_real(original: Any, grid: Any, *args: Any, **kwargs: Any) -> Any:
    return original[grid](*args, **kwargs)


def install(root: Path, calls: Counter, *, emulated: bool) -> Installed:
    """Replace every stand-in's definition in the loaded tree under `root`. Triton kernels are
    stood in on the emulated device only: on CUDA they run, counted the same way. Raises
    TreeDrift when a required one is missing."""
    found: dict[str, list[str]] = {m.label: [m.module] for m in MODULE_STAND_INS}
    real = frozenset() if emulated else frozenset(s.label for s in STAND_INS if s.triton)
    defined = _definitions(root, {s.target.partition(".")[0] for s in STAND_INS})
    for s in STAND_INS:
        body = s.body
        if s.label in real:
            body = _launch_for_real if s.launch else _run_for_real
        head, _, method = s.target.partition(".")
        where = []
        for mod_name in defined[head]:
            module = importlib.import_module(mod_name)
            if method:
                if _patch_method(getattr(module, head), method, s.label, calls, body):
                    where.append(mod_name)
            else:
                original = getattr(module, head)
                counted = _counted(s.label, calls, body, original)
                _patch_function(module, head, _Launch(counted) if s.launch else counted)
                where.append(mod_name)
        if not where and s.required:
            raise TreeDrift(f"{root}: no definition of {head} for stand-in {s.label!r}")
        found[s.label] = found.get(s.label, []) + where
    return Installed(calls, found, real)
