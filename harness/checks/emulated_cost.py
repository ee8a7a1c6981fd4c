"""What the emulated device costs on the host, against plain CPU tensors and against the least
any emulation of this kind pays.

The emulated device sees each op twice in Python: a torch-function mode (factories, host-to-device
moves, the op's user-facing name) and a wrapper subclass's `__torch_dispatch__` (each aten op:
device checks, transfers, waits). Its floors run the same step with nothing but the machinery:

- `dispatch_passthrough`: plain CPU tensors under a dispatch mode that only calls each aten op,
  the least any emulation that sees every op pays (and it could not report another device);
- `wrapper_dispatch_mode`: one dispatch mode, no function mode, that unwraps `meta` wrappers,
  runs the CPU kernel and rewraps: the design with a single Python call per op;
- `wrapper_floor`: this design's mode and wrapper subclass, doing nothing but unwrap, run and
  rewrap, below which no rule-keeping can go.

All run interleaved round by round, on one intra-op thread; every sample is kept (one row per
step, ns). One thread, because the emulation adds serial Python while PyTorch spreads the plain
step's larger kernels over its pool as its threads happen to be scheduled: on the default pool
of an idle 2-core machine the plain step took 275 µs in some runs and 380 to 430 µs in others,
back to back, and every ratio moved with it.

    python -m harness check emulated-cost --out DIR [--steps N]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from harness.checks import sync_overhead
from harness.checks.registry import check
from harness.checks.sync_overhead import Row, sample_rows, time_steps
from harness.results.files import result_files, write_dict_rows
from harness.results.meta import write_check_meta
from syncledger import emulated_device, region

CONFIGS = (
    "cpu_tensors",
    "dispatch_passthrough",
    "wrapper_dispatch_mode",
    "wrapper_floor",
    "emulated_device",
)
_CPU = torch.device("cpu")
_META = torch.device("meta")


def _unwrap(x: Any) -> Any:
    if type(x) is FloorTensor:
        return x.elem
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(y) for y in x)
    if isinstance(x, torch.device) and x.type == "meta":
        return _CPU
    return x


class FloorTensor(torch.Tensor):
    """A `meta` wrapper around CPU values whose dispatch only unwraps, runs and rewraps."""

    elem: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> FloorTensor:
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape,
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            device="meta",
        )
        r.elem = elem
        return r

    @classmethod
    def __torch_dispatch__(cls, func, _types, args=(), kwargs=None):  # type: ignore[override]
        return _on_host(func, args, kwargs)


class FloorMode(TorchFunctionMode):
    """A torch-function mode that passes every call through; Python scalars given to `where`
    become host tensors (on `meta` they would hold no value), as the emulated device's do."""

    def __torch_function__(self, func, _types, args=(), kwargs=None):  # type: ignore[override]
        if func is torch.where:
            args = tuple(torch.tensor(a) if isinstance(a, (int, float)) else a for a in args)
        return func(*args, **(kwargs or {}))


class PassThroughDispatchMode(TorchDispatchMode):
    """Each aten op through Python and on to its CPU kernel, unchanged."""

    def __torch_dispatch__(self, func, _types, args=(), kwargs=None):  # type: ignore[override]
        return func(*args, **(kwargs or {}))


def _rewrap(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return FloorTensor(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_rewrap(y) for y in x)
    return x


def _on_host(func: Any, args: tuple, kwargs: dict | None) -> Any:
    """The op on the wrappers' CPU values (a `meta` device asked for is the host), rewrapped."""
    return _rewrap(func(*_unwrap(args), **{k: _unwrap(v) for k, v in (kwargs or {}).items()}))


class FloorDispatchMode(TorchDispatchMode):
    """One Python call per aten op, factories included: unwrap the `meta` wrappers (a `meta`
    device asked for is the host), run the CPU kernel, rewrap what it returns."""

    def __torch_dispatch__(self, func, _types, args=(), kwargs=None):  # type: ignore[override]
        return _on_host(func, args, kwargs)


@contextlib.contextmanager
def one_intra_op_thread() -> Iterator[None]:
    """PyTorch's CPU kernels on one thread for the duration (the caller's count restored)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def cost_rows(steps: int, rounds: int = 5) -> list[Row]:
    """Host ns per metadata step of each configuration, `rounds` interleaved rounds, on one
    intra-op thread."""
    with one_intra_op_thread():
        return _interleaved_rows(steps, rounds)


def _interleaved_rows(steps: int, rounds: int) -> list[Row]:
    samples: dict[str, list[int]] = {c: [] for c in CONFIGS}
    per_round = max(1, steps // rounds)
    for _ in range(rounds):
        samples["cpu_tensors"] += time_steps(
            sync_overhead.metadata_step(_CPU), region, _CPU, per_round, contextlib.nullcontext
        )
        with PassThroughDispatchMode():
            step = sync_overhead.metadata_step(_CPU)
            samples["dispatch_passthrough"] += time_steps(
                step, region, _CPU, per_round, contextlib.nullcontext
            )
        with FloorDispatchMode():
            step = sync_overhead.metadata_step(_META)
            samples["wrapper_dispatch_mode"] += time_steps(
                step, region, _META, per_round, contextlib.nullcontext
            )
        with FloorMode():
            step = sync_overhead.metadata_step(_CPU, place=FloorTensor)
            samples["wrapper_floor"] += time_steps(
                step, region, _CPU, per_round, contextlib.nullcontext
            )
        with emulated_device() as dev:
            step = sync_overhead.metadata_step(dev)
            samples["emulated_device"] += time_steps(
                step, region, dev, per_round, contextlib.nullcontext
            )
    return [row for name, values in samples.items() for row in sample_rows(name, values)]


def summary(rows: list[Row]) -> list[str]:
    """The medians and their ratios, one line each."""
    med = {
        c: statistics.median(float(r["value"]) for r in rows if r["config"] == c)  # type: ignore[arg-type]
        for c in CONFIGS
    }
    cpu = med["cpu_tensors"]
    lines = [f"{'cpu_tensors':22s} {cpu / 1e3:8.1f} us"]
    for c in CONFIGS[1:]:
        lines.append(f"{c:22s} {med[c] / 1e3:8.1f} us  {med[c] / cpu:.2f}x cpu_tensors")
    lines[-1] += f", {med['emulated_device'] / med['wrapper_floor']:.2f}x wrapper_floor"
    return lines


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True, help="folder for the result files")
    ap.add_argument("--steps", type=int, default=500, help="timed steps per configuration")


@check(
    "emulated-cost",
    "what the emulated device costs against plain CPU tensors, on one intra-op thread",
    configure=_configure,
    in_all=False,
)
def run_check(args: argparse.Namespace) -> int:
    files = result_files(args.out, ("emulated_cost.csv", "meta.json"))
    rows = cost_rows(args.steps)
    write_dict_rows(files["emulated_cost.csv"], rows)
    kind = "cuda" if torch.cuda.is_available() else "emu"
    write_check_meta(args.out, "emulated_cost", kind, steps=args.steps, intra_op_threads=1)
    print("\n".join(summary(rows)))
    return 0
