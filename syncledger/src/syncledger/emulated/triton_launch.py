"""Triton kernels launched on emulated tensors run in Triton's interpreter, on their host values.

Optional: active only where Triton is installed. While the emulated device claims `"cuda"`, a
launch (`kernel[grid](...)`, what autotuners and heuristics call too) whose arguments hold an
emulated tensor runs in Triton's interpreter with the host values behind them, whether the
kernel was built for the GPU (`JITFunction`) or for the interpreter (`TRITON_INTERPRET=1`); any
other launch runs as before. The grid is worked out first, from the arguments as the program
passed them, so a grid that reads a device value makes its sync; the launch itself makes none,
as on CUDA. The `@triton.jit` functions the kernel calls are interpreted too. Triton may be
imported after the device starts: its launch is patched once its module loads.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import inspect
import sys
import threading
from typing import Any

from syncledger.emulated.tensor import EmuTensor

_JIT = "triton.runtime.jit"
_INTERPRETER = "triton.runtime.interpreter"
# (class, attribute) -> what it was before the patch
_saved: dict[tuple[Any, str], Any] = {}
# id of a JITFunction -> (it, its InterpretedFunction); by id, as hashing a JITFunction reads
# its source's globals, which the interpreter patches while a kernel runs
_interpreted: dict[int, tuple[Any, Any]] = {}


class _Launch(threading.local):
    depth = 0  # >0 while this thread runs a kernel in the interpreter


_LAUNCH = _Launch()


def _host(x: Any) -> Any:
    return x._elem if isinstance(x, EmuTensor) else x


def _bound(fn: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The kernel's arguments by name, defaults included: what Triton hands a grid function."""
    signature = inspect.signature(fn.fn)
    own = {k: v for k, v in kwargs.items() if k in signature.parameters}
    bound = signature.bind_partial(*args, **own)
    bound.apply_defaults()
    return dict(bound.arguments)


def _interpreter_of(fn: Any) -> Any:
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(fn, InterpretedFunction):
        return fn
    known = _interpreted.get(id(fn))
    if known is None:
        known = _interpreted[id(fn)] = (fn, InterpretedFunction(fn.fn))
    return known[1]


def _interpreted_run() -> Any:
    """The interpreter's own launch (not this module's patch of it)."""
    from triton.runtime.interpreter import InterpretedFunction

    return _saved.get((InterpretedFunction, "run"), InterpretedFunction.run)


def _launcher(original: Any) -> Any:
    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if not any(isinstance(a, EmuTensor) for a in (*args, *kwargs.values())):
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        if callable(grid):
            grid = grid(_bound(self, args, kwargs))
        interpreted = _interpreter_of(self)
        host_args = [_host(a) for a in args]
        host_kwargs = {k: _host(v) for k, v in kwargs.items()}
        _LAUNCH.depth += 1
        try:
            return _interpreted_run()(
                interpreted, *host_args, grid=grid, warmup=warmup, **host_kwargs
            )
        finally:
            _LAUNCH.depth -= 1

    return run


def _call(self: Any, *args: Any, **kwargs: Any) -> Any:
    # a `@triton.jit` function the interpreted kernel calls (its own helpers, triton.language's
    # `tl.sum`): compiled, it refuses a call from Python, so it is interpreted too
    if _LAUNCH.depth:
        return _interpreter_of(self)(*args, **kwargs)
    return _saved[(type(self), "__call__")](self, *args, **kwargs)


def _set(cls: Any, name: str, value: Any) -> None:
    if (cls, name) not in _saved:
        _saved[cls, name] = getattr(cls, name)
        setattr(cls, name, value)


def _patch(module: Any) -> None:
    if module.__name__ == _JIT:
        jit = module.JITFunction
        _set(jit, "run", _launcher(jit.run))
        _set(jit, "__call__", _call)
    else:
        interpreted = module.InterpretedFunction
        _set(interpreted, "run", _launcher(interpreted.run))


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Patches Triton's launch when its module is imported while the device is active."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in (_JIT, _INTERPRETER):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader_state = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> Any:
        return spec.loader_state.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader_state.exec_module(module)
        _patch(module)


_FINDER = _PatchOnImport()


def install() -> None:
    for name in (_JIT, _INTERPRETER):
        module = sys.modules.get(name)
        if module is not None:
            _patch(module)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for (cls, name), value in _saved.items():
        setattr(cls, name, value)
    _saved.clear()
    _interpreted.clear()
