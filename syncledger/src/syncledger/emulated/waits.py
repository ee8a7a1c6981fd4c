"""How many times an aten op makes the host wait on CUDA, decided from the op itself.

Generic first: an op that torch tags `data_dependent_output` (a Python value from device data:
`_local_scalar_dense`, `equal`, `allclose`) or `dynamic_output_shape` (an output size read from
device data: `nonzero`, `masked_select`, `unique`, `bincount`, ...) reads the device once. No list
of syncing ops is kept by hand.

Then what the tags cannot say, each measured on an H200 (torch 2.11) by the blocking oracle of
the harness's `check sync`; the catalogue case that shows it is named beside each rule. These are
facts of the CUDA kernels (the emulated device runs the CPU kernels, which read differently).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from syncledger.emulated.tensor import EmuTensor
from syncledger.events import SyncKind
from syncledger.rules import (
    IndexArg,
    ValueArg,
    index_arg,
    index_kinds,
    index_put_kinds,
    masked_fill_kinds,
)

aten = torch.ops.aten
D2H = SyncKind.D2H_READ
_READS_DEVICE = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)


def _index_args(indices: Sequence[Any]) -> list[IndexArg | None]:
    return [None if i is None else index_arg(isinstance(i, EmuTensor), i.dtype) for i in indices]


def _value_arg(value: Any) -> ValueArg:
    if isinstance(value, torch.Tensor):
        return ValueArg(isinstance(value, EmuTensor), value.numel(), value.dim())
    return ValueArg(on_device=False)


def _arg(args: tuple, kwargs: dict, i: int, name: str, default: Any = None) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def _index(args: tuple, kwargs: dict) -> list[SyncKind]:
    # cases getitem_bool_mask, getitem_host_index, getitem_host_bool_mask
    return index_kinds(_index_args(_arg(args, kwargs, 1, "indices")))


def _index_put(args: tuple, kwargs: dict) -> list[SyncKind]:
    # cases setitem_* (masks, host and device indices, Python and device scalars)
    return index_put_kinds(
        _index_args(_arg(args, kwargs, 1, "indices")),
        _value_arg(_arg(args, kwargs, 2, "values")),
        bool(_arg(args, kwargs, 3, "accumulate", False)),
    )


def _masked_fill(args: tuple, kwargs: dict) -> list[SyncKind]:
    # cases masked_fill_device_scalar, masked_fill_host_scalar
    return masked_fill_kinds(_value_arg(_arg(args, kwargs, 2, "value")))


def _repeat_interleave(args: tuple, kwargs: dict) -> list[SyncKind]:
    # case repeat_interleave_tensor: the output size, then the check that no repeat is negative
    return [] if kwargs.get("output_size") is not None else [D2H, D2H]


def _histc(args: tuple, kwargs: dict) -> list[SyncKind]:
    # cases histc_*: without a range CUDA reads the input's min and max to the host
    lo, hi = _arg(args, kwargs, 2, "min", 0), _arg(args, kwargs, 3, "max", 0)
    return [D2H, D2H] if lo == hi else []


def _equal(args: tuple, kwargs: dict) -> list[SyncKind]:
    # cases equal, equal_same_tensor: a tensor is equal to itself without a look
    return [] if args[0] is args[1] else [D2H]


_MEASURED: dict[Any, Callable[[tuple, dict], list[SyncKind]]] = {
    aten.index.Tensor: _index,
    aten.index_put_.default: _index_put,
    aten.index_put.default: _index_put,
    aten._index_put_impl_.default: _index_put,
    aten.masked_fill_.Tensor: _masked_fill,
    aten.masked_fill.Tensor: _masked_fill,
    aten.repeat_interleave.Tensor: _repeat_interleave,
    aten.histc.default: _histc,
    aten.equal.default: _equal,
}

# Ops whose CUDA kernels wait where their CPU kernels do not, derived on a GPU over PyTorch's
# OpInfo database, the catalogue and the real programs (`python -m harness check op-table`):
# cuda_op_waits.json beside this file. An entry is the op's waits per call: a count of device
# reads, a list of kinds in order, or, for an op whose waits depend on its arguments,
# {"by_args": {call class: waits}, "else": waits} (`call_class`).
OP_TABLE = Path(__file__).with_name("cuda_op_waits.json")
Waits = int | list[str] | dict[str, Any]


def load_op_table(path: Path = OP_TABLE) -> dict[str, Waits]:
    """Op overload name ("aten::bincount", "aten::normal.Tensor_Tensor") -> its waits per call
    on CUDA, as the table writes them."""
    return dict(json.loads(path.read_text())["waits"])


def _kinds(waits: int | list[str]) -> list[SyncKind]:
    return [D2H] * waits if isinstance(waits, int) else [SyncKind(k) for k in waits]


def _leaves(args: tuple, kwargs: dict) -> Iterator[Any]:
    for x in (*args, *kwargs.values()):
        if isinstance(x, (list, tuple)):
            yield from x
        else:
            yield x


def call_class(args: tuple, kwargs: dict, on_device: Callable[[torch.Tensor], bool]) -> str:
    """What decides an op's waits on CUDA, beside the op: one letter per tensor argument, in
    order (lists flattened): `h` on the host, and on the device `e` empty, `s` a scalar, `d`
    any other."""
    out = []
    for x in _leaves(args, kwargs):
        if isinstance(x, torch.Tensor):
            if not on_device(x):
                out.append("h")
            elif x.numel() == 0:
                out.append("e")
            else:
                out.append("s" if x.dim() == 0 else "d")
    return "".join(out)


def _is_emulated(t: torch.Tensor) -> bool:
    return isinstance(t, EmuTensor)


def _table_rule(waits: Waits) -> Callable[[tuple, dict], list[SyncKind]]:
    if not isinstance(waits, dict):
        kinds = _kinds(waits)
        return lambda args, kwargs: list(kinds)
    by_args = {c: _kinds(w) for c, w in waits["by_args"].items()}
    otherwise = _kinds(waits["else"])
    return lambda args, kwargs: list(by_args.get(call_class(args, kwargs, _is_emulated), otherwise))


def overload_named(name: str) -> Any | None:
    """The op overload a name such as "aten::normal.Tensor_Tensor" names; None where its library
    is not loaded here (torchvision's ops beside a CPU-only PyTorch)."""
    namespace, _, qualified = name.partition("::")
    op, _, overload = qualified.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), op), overload or "default")
    except (AttributeError, RuntimeError):
        return None


# By name, not by op: a library whose ops the table names (torchvision) may load after the
# ledger, and its ops exist only from then on. A plan asks once per op (door._PLANS).
_TABLE: dict[str, Callable[[tuple, dict], list[SyncKind]]] = {
    name: _table_rule(waits) for name, waits in load_op_table().items()
}


_TAGGED: dict[Any, bool] = {}  # op -> whether its tags say it reads the device


def reads_by_tags(func: Any) -> bool:
    """Whether the op's tags say it reads the device (once per call)."""
    tagged = _TAGGED.get(func)
    if tagged is None:
        tagged = _TAGGED[func] = any(tag in func.tags for tag in _READS_DEVICE)
    return tagged


def measured_ops() -> frozenset[str]:
    """The op overloads (their names) whose waits a rule here decides from their arguments."""
    return frozenset(f.name() for f in _MEASURED)


def _one_read(args: tuple, kwargs: dict) -> list[SyncKind]:
    return [D2H]


def rule_for(func: Any) -> Callable[[tuple, dict], list[SyncKind]] | None:
    """How to tell the waits of one call of aten op `func` on CUDA, in order (None: it never
    waits)."""
    rule = _MEASURED.get(func) or _TABLE.get(func.name())
    if rule is not None:
        return rule
    return _one_read if reads_by_tags(func) else None


def one_hot_kinds(num_classes: int) -> list[SyncKind]:
    """`F.one_hot` (composite, so it never reaches aten whole): without `num_classes` CUDA reads
    the largest class to size the output (cases one_hot_*)."""
    return [D2H] if num_classes < 0 else []
