"""Imports a sglang tree's own Python without running what the metadata paths never need.

A meta-path finder serves ``sglang.*`` from the tree (a release's files or a checkout), so
nothing installed under that name is touched. Three departures from a plain import, each
named here:

- a few package ``__init__``s pull in the whole server (models, quantization kernels, configs);
  they are not run: such a package's names resolve on first use from the submodule its
  ``__init__`` imports them from;
- sglang modules the paths import but never call, and third-party packages the tree imports
  that this environment lacks, are empty modules whose attributes are inert placeholders (one
  that is called or tested for truth raises, so a path that does reach one fails loudly);
- everything loaded is removed from ``sys.modules`` on leaving, so trees load one after another
  in one process.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

# packages whose __init__ imports the server: their names resolve lazily from submodules
LAZY_INIT = (
    "sglang",
    "sglang.jit_kernel.dsv4",
    "sglang.srt.layers.quantization",
    "sglang.srt.configs",
    "sglang.srt.layers.deep_gemm_wrapper",  # its flags (configurer) are read, its GEMMs never
)
# sglang modules the metadata paths import (through module-level imports) and never call
UNCALLED = (
    "sglang.srt.entrypoints.openai.protocol",
    "sglang.srt.function_call.function_call_parser",
    "sglang.srt.parser.reasoning_parser",
    "sglang.srt.utils.hf_transformers_utils",
    "sglang.srt.utils.hf_transformers",  # the same helpers as a package (0.5.21 on)
    "sglang.srt.models.deepseek_v2",
    "sglang.srt.layers.layernorm",
    "sglang.srt.hardware_backend.npu",
    "sglang.srt.state_capturer",
    # the relay's buffer set-up (FutureMap.stash) reads it, never its publish or resolve;
    # 0.5.14's overlap_utils imports it at module level, and through it the scheduler's batch
    "sglang.srt.speculative.spec_utils",
    "sglang.srt.observability",
)
# third-party packages the tree imports at module level and never calls on these paths:
# stood in only where this environment lacks them
THIRD_PARTY = (
    "orjson",
    "pybase64",
    "requests",
    "starlette",
    "openai",
    "einops",
    "torchvision",
    "tvm_ffi",  # 0.5.23's all-reduce kernels import it at module level; its planners stand in
    "flash_mla",  # 0.5.23 wraps it in a module of its own; the scheduler metadata stands in
)
_HARNESS = str(Path(__file__).resolve().parent)


class TreeDrift(Exception):
    """The tree needs what the loader assumed it never would: one line says what."""


class MissingAttribute(TreeDrift, AttributeError):
    """Upstream read an attribute the harness's stand-in object lacks. An AttributeError too,
    so that upstream's own ``getattr(x, name, default)`` and ``hasattr`` still see it absent."""


def _site(code: Any, line: int) -> str:
    path = code.co_filename
    path = path[len(_HARNESS) - len("harness/upstream") :] if path.startswith(_HARNESS) else path
    return f"{path.split('sglang/', 1)[-1]}:{line} {code.co_qualname}"


def caller(depth: int = 2) -> str:
    """``file:line function`` of upstream's frame `depth` calls up, for a drift line."""
    frame = sys._getframe(depth)
    return _site(frame.f_code, frame.f_lineno)


def drift_of(exc: Exception, *, loading: bool = False) -> TreeDrift | None:
    """What an exception raised on upstream's side means: None when it is upstream's own
    outcome (raised in the tree's code, or by torch under it), else the drift it shows: a module
    this environment lacks and nothing stands in for, or a failure of the harness's own side
    (its adapter, a stand-in's body) where the tree changed what it passes or expects. While
    `loading` the tree, every exception is drift."""
    if isinstance(exc, TreeDrift):
        return exc
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code, tb.tb_lineno))
        tb = tb.tb_next
    ours = [(c, n, c.co_filename.startswith(_HARNESS)) for c, n in frames]
    ours = [(c, n, mine) for c, n, mine in ours if mine or "/sglang/" in c.co_filename]
    tree = [_site(c, n) for c, n, mine in ours if not mine]
    where = tree[-1] if tree else "upstream"
    if isinstance(exc, ImportError):
        return TreeDrift(f"{where} imports {exc.name}, which is absent and not stood in")
    if any("/triton/" in c.co_filename for c, _ in frames):  # no outcome of upstream's code
        return TreeDrift(
            f"{where}: a Triton kernel failed ({type(exc).__name__}: {exc}); on the emulated "
            "device every kernel on the paths must be stood in"
        )
    if ours and ours[-1][2]:  # raised in the harness's side, under the tree's call
        return TreeDrift(
            f"{_site(ours[-1][0], ours[-1][1])} (called from {where}): {type(exc).__name__}: {exc}"
        )
    if loading:
        return TreeDrift(f"loading the tree, {where}: {type(exc).__name__}: {exc}")
    return None


@contextmanager
def drift_named(*, loading: bool = False) -> Iterator[None]:
    """Inside, an exception that shows drift is raised as that TreeDrift (one line)."""
    try:
        yield
    except Exception as exc:
        drift = drift_of(exc, loading=loading)
        if drift is None or drift is exc:
            raise
        raise drift from exc


class Placeholder:
    """A name taken from a stood-in module. Classes may derive from it; a call or a truth
    test means the path reached code it was assumed never to reach."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TreeDrift(f"upstream called {self._name}, which the loader stood in as unused")

    def __bool__(self) -> bool:
        raise TreeDrift(f"upstream tested {self._name}, which the loader stood in as unused")

    def __getattr__(self, name: str) -> Placeholder:
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder(f"{self._name}.{name}")

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)

    def __or__(self, other: object) -> Any:  # `X | None` in annotations evaluated at import
        return object

    __ror__ = __or__

    def __getitem__(self, item: object) -> Any:  # `X[int]` in annotations
        return object


class _InertModule(ModuleType):
    def __getattr__(self, name: str) -> Placeholder | bool:
        if name.startswith("__"):
            raise AttributeError(name)
        # a platform flag (0.5.14 imports deepseek_v2's _is_hip, 0.5.23 its _use_aiter): CUDA's
        if name.startswith(("_is_", "_use_")):
            return name == "_is_cuda"
        return Placeholder(f"{self.__name__}.{name}")


def inert_module(name: str) -> ModuleType:
    """A stood-in module: a package whose names are inert placeholders."""
    module = _InertModule(name)
    module.__path__ = []  # a package: its submodules are inert too
    return module


class _InertLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return inert_module(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        return None


class _LazyInitLoader(importlib.abc.Loader):
    """Runs none of the ``__init__``; its ``from .x import Name`` lines become lazy names."""

    def __init__(self, init: Path) -> None:
        self.init = init

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        homes = _imported_names(self.init, module.__name__)

        def __getattr__(name: str) -> Any:
            if name not in homes:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            home, attr = homes[name]
            owner = importlib.import_module(home)
            value = (
                getattr(owner, attr)
                if hasattr(owner, attr)
                else importlib.import_module(f"{home}.{attr}")
            )
            setattr(module, name, value)
            return value

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


def _imported_names(init: Path, package: str) -> dict[str, tuple[str, str]]:
    """name -> (module it comes from, its name there), for each from-import of an __init__."""
    out: dict[str, tuple[str, str]] = {}
    for node in ast.parse(init.read_text()).body:
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            home = f"{base}.{node.module}" if node.module else base
        elif node.module and node.module.startswith("sglang"):
            home = node.module
        else:
            continue
        for alias in node.names:
            out[alias.asname or alias.name] = (home, alias.name)
    return out


def _under(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in roots)


class _TreeFinder(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path, inert: tuple[str, ...]) -> None:
        self.root = root
        self.inert = inert

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if _under(name, self.inert):
            return importlib.machinery.ModuleSpec(name, _InertLoader(), is_package=True)
        if not _under(name, ("sglang",)):
            return None
        where = self.root.joinpath(*name.split("."))
        init = where / "__init__.py"
        if init.is_file():
            if name in LAZY_INIT:
                spec = importlib.machinery.ModuleSpec(
                    name, _LazyInitLoader(init), origin=str(init), is_package=True
                )
                spec.submodule_search_locations = [str(where)]
                return spec
            return importlib.util.spec_from_file_location(
                name, init, submodule_search_locations=[str(where)]
            )
        if where.with_suffix(".py").is_file():
            return importlib.util.spec_from_file_location(name, where.with_suffix(".py"))
        if where.is_dir():  # a namespace package
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [str(where)]
            return spec
        return None


def _missing(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in names if n not in sys.modules and importlib.util.find_spec(n) is None)


@contextmanager
def tree_imported(root: Path, extra_inert: tuple[str, ...] = ()) -> Iterator[None]:
    """While inside, ``import sglang...`` reads the tree under ``root`` (the folder that holds
    ``sglang/``). ``extra_inert`` names more modules to stand in as inert (the compiled
    extensions the stand-ins replace)."""
    inert = UNCALLED + _missing(THIRD_PARTY) + extra_inert
    finder = _TreeFinder(root, inert)
    before = set(sys.modules)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            if _under(name, ("sglang", *inert)):
                del sys.modules[name]
