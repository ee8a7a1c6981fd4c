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
)
# sglang modules the metadata paths import (through module-level imports) and never call
UNCALLED = (
    "sglang.srt.entrypoints.openai.protocol",
    "sglang.srt.function_call.function_call_parser",
    "sglang.srt.parser.reasoning_parser",
    "sglang.srt.utils.hf_transformers_utils",
    "sglang.srt.models.deepseek_v2",
    "sglang.srt.layers.layernorm",
    "sglang.srt.hardware_backend.npu",
    "sglang.srt.layers.deep_gemm_wrapper",
    "sglang.srt.state_capturer",
    "sglang.srt.observability",
)
# third-party packages the tree imports at module level and never calls on these paths:
# stood in only where this environment lacks them
THIRD_PARTY = ("orjson", "pybase64", "requests", "starlette", "openai", "einops", "torchvision")


class TreeDrift(Exception):
    """The tree needs what the loader assumed it never would: one line says what."""


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
        if name.startswith("_is_"):  # a platform flag (0.5.14 imports deepseek_v2's _is_hip)
            return name == "_is_cuda"
        return Placeholder(f"{self.__name__}.{name}")


class _InertLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = _InertModule(spec.name)
        module.__path__ = []  # a package: its submodules are inert too
        return module

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
