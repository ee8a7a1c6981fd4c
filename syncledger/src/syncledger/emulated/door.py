"""The one door through which every aten op on the emulated device passes.

For each op: refuse device mixes a GPU would refuse; classify copies between host and device
(`copy_`, `_to_copy`) by the transfer rules; record the waits the op makes on CUDA
(`syncledger.emulated.waits`); then run it on the CPU values and wrap the results. While a
wait timer is open (syncledger.wait_timer), an op that syncs is timed on the host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from syncledger.emulated import pinned
from syncledger.emulated.capture import wait
from syncledger.emulated.tensor import EmulationError, EmuTensor, nbytes
from syncledger.emulated.waits import rule_for
from syncledger.events import SyncKind
from syncledger.rules import HostMemory, classify_d2h, classify_h2d, copy_host_memory
from syncledger.state import STATE
from syncledger.wait_timing import add_wait, timed

aten = torch.ops.aten

# Facts of the CUDA kernels that a CPU kernel cannot tell:
# ops that may take some arguments (their positions) from host memory: CUDA moves index tensors
# to the device itself
_HOST_ARGS_OK: dict[Any, frozenset[int]] = {
    aten.index.Tensor: frozenset({1}),
    aten.index_put_.default: frozenset({1}),
    aten.index_put.default: frozenset({1}),
    aten._index_put_impl_.default: frozenset({1}),
}
# ops that must take some arguments from host memory: the packed-sequence ops read lengths and
# batch sizes on the host, and fail on CUDA for device ones
_HOST_ARGS_ONLY: dict[Any, frozenset[int]] = {
    aten._pack_padded_sequence.default: frozenset({1}),
    aten._pad_packed_sequence.default: frozenset({1}),
}
# ops that return some results in host memory (their positions)
_HOST_RESULTS: dict[Any, frozenset[int]] = {
    aten._pack_padded_sequence.default: frozenset({1}),  # batch_sizes
    aten._pad_packed_sequence.default: frozenset({1}),  # lengths
}


def _check(func: Any, x: Any) -> None:
    if not isinstance(x, torch.Tensor) or isinstance(x, EmuTensor):
        return
    if x.is_cuda:
        raise EmulationError(
            f"{func}: emulated-device tensors cannot be mixed with real CUDA tensors"
        )
    if x.is_meta:
        raise EmulationError(
            f"{func}: a plain meta tensor: a value was made on the meta device directly "
            "instead of through the emulated device, so it holds no data"
        )
    if x.dim() > 0 and func not in _TRANSFERS:
        raise EmulationError(
            f"{func}: expected all tensors on the same device, got the emulated device and "
            f"a host tensor of shape {tuple(x.shape)} (this would fail on a GPU)"
        )


def _host_arg(plan: _Plan, i: int, x: Any) -> Any:
    """Argument `i`, not a device tensor nor a plain value: refused where a GPU would refuse it,
    else what the CPU kernel takes for it."""
    if isinstance(x, EmuTensor):  # a subclass of the device tensor
        if i in plan.host_only:
            _refuse_device_arg(plan.func, i)
        return x._elem
    if i not in plan.host_ok:
        if isinstance(x, (list, tuple)):
            for y in x:
                _check(plan.func, y)
        else:
            _check(plan.func, x)
    return _unwrap(x)


def _refuse_device_arg(func: Any, i: int) -> None:
    raise EmulationError(
        f"{func}: argument {i} must be a host (CPU) tensor, as CUDA's kernel requires (this "
        "would fail on a GPU)"
    )


def _host_args(plan: _Plan, args: tuple) -> list[Any]:
    """The CPU kernel's positional arguments, each checked as a GPU checks its devices: host
    tensors may only be 0-dim scalars, or the arguments CUDA takes from the host."""
    out = []
    for i, x in enumerate(args):
        t = type(x)
        if t is EmuTensor:
            if plan.host_only and i in plan.host_only:
                _refuse_device_arg(plan.func, i)
            out.append(x._elem)
        elif t in _PLAIN:
            out.append(x)
        else:
            out.append(_host_arg(plan, i, x))
    return out


def _host_kwargs(plan: _Plan, n_args: int, kwargs: dict) -> dict:
    """The keyword arguments as `_host_args` makes the positional ones (numbered after them)."""
    return {k: _host_arg(plan, i, v) for i, (k, v) in enumerate(kwargs.items(), n_args)}


# argument types that hold no tensor (the common case, checked first)
_PLAIN = frozenset({int, float, bool, type(None), torch.dtype, torch.memory_format, torch.layout})


def _unwrap(x: Any) -> Any:
    if type(x) is EmuTensor or isinstance(x, EmuTensor):
        return x._elem
    if isinstance(x, torch.device) and x.type == "meta":
        return torch.device("cpu")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(y) for y in x)
    return x


def _wrap_result(x: Any, own: dict[int, EmuTensor]) -> Any:
    # in-place ops and ops returning an input return the caller's own wrapper
    if isinstance(x, (list, tuple)):
        return type(x)(_wrap_result(y, own) for y in x)
    if not isinstance(x, torch.Tensor):
        return x
    mine = own.get(id(x))
    return EmuTensor(x) if mine is None else mine


def wrap_outputs(x: Any) -> Any:
    """Wrap the host results of a factory run for the emulated device."""
    return _wrap_result(x, {})


# A transfer takes the op's arguments twice: as the program passed them (which side of the
# copy each is on) and as the CPU kernel takes them (`_host_args`, `_host_kwargs`).
Transfer = Callable[[tuple, dict, list, dict], torch.Tensor]


def _to_copy(args: tuple, kwargs: dict, uargs: list, ukwargs: dict) -> torch.Tensor:
    non_blocking = bool(kwargs.get("non_blocking", False))
    device = kwargs.get("device")
    t0 = time.perf_counter_ns() if STATE.wait_timers else 0
    out = aten._to_copy.default(*uargs, **{k: v for k, v in ukwargs.items() if k != "non_blocking"})
    waited = time.perf_counter_ns() - t0
    if device is None or torch.device(device).type != "cpu":
        return EmuTensor(out)
    # like CUDA, a non_blocking copy to the host lands in (contiguous) pinned memory
    if non_blocking:
        pinned.pin(out)
    kind = classify_d2h(nbytes(out), non_blocking, HostMemory(pinned=non_blocking))
    if kind is not None:
        wait(kind, "_to_copy", nbytes(out))
        if STATE.wait_timers:
            add_wait(kind, t0, waited)
    return out


def _copy(args: tuple, kwargs: dict, uargs: list, ukwargs: dict) -> torch.Tensor:
    dst, src = args[0], args[1]
    dst_values, src_values = uargs[0], uargs[1]
    non_blocking = bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
    d_dev, s_dev = isinstance(dst, EmuTensor), isinstance(src, EmuTensor)
    kind = None
    if d_dev and not s_dev:
        memory = copy_host_memory(src, dst, pinned.is_pinned(src))
        kind = classify_h2d(nbytes(dst), non_blocking, memory)
    elif s_dev and not d_dev:
        memory = copy_host_memory(dst, src, pinned.is_pinned(dst))
        kind = classify_d2h(nbytes(dst), non_blocking, memory)
    if kind is None:
        dst_values.copy_(src_values)
    else:  # recorded after the copy: a copy that raises records no sync
        timed(kind, dst_values.copy_, src_values)
        wait(kind, "copy_", nbytes(dst))
    return dst


_TRANSFERS: dict[Any, Transfer] = {
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy,
}


def _view_in_place(func: Any) -> Transfer:
    """An op that changes a tensor's view in place (`transpose_`, `unsqueeze_`, `as_strided_`):
    the values' view, then the device tensor's own, which PyTorch's C++ side reads (its meta
    kernel only restrides)."""

    def run(args: tuple, kwargs: dict, uargs: list, ukwargs: dict) -> Any:
        func(*uargs, **ukwargs)
        with torch._C._DisableTorchDispatch():
            func(*args, **kwargs)
        return args[0]

    return run


def transfer_ops() -> frozenset[str]:
    """The op overloads (their names) whose waits the transfer rules decide, per call."""
    return frozenset(f.name() for f in _TRANSFERS)


@dataclass(frozen=True)
class _Plan:
    """What the door does with one aten op, worked out once per op."""

    func: Any
    run: Callable[..., Any]  # the op itself, past OpOverload's Python layer
    name: str
    handler: Transfer | None  # ops the door runs its own way: transfers, in-place views
    waits: Callable[[tuple, dict], list[SyncKind]] | None
    host_ok: frozenset[int]
    host_only: frozenset[int]
    host_results: frozenset[int] | None


# op -> plan. Keyed by the op itself, not id(op): id() raises an audit event, and the ledger's
# audit hook (syncledger.children) makes each one cost a Python call
_PLANS: dict[Any, _Plan] = {}


def _plan(func: Any) -> _Plan:
    host_only = _HOST_ARGS_ONLY.get(func, frozenset())
    plan = _Plan(
        func=func,
        run=getattr(func, "_op", func),
        name=func.overloadpacket.__name__,
        handler=_TRANSFERS.get(func)
        or (_view_in_place(func) if torch.Tag.inplace_view in func.tags else None),
        waits=rule_for(func),
        host_ok=_HOST_ARGS_OK.get(func, host_only),
        host_only=host_only,
        host_results=_HOST_RESULTS.get(func),
    )
    _PLANS[func] = plan
    return plan


def _own(out: Any, args: tuple) -> Any:
    """The result as a device tensor: the caller's own wrapper when the op returned an input."""
    for a in args:
        if type(a) is EmuTensor and a._elem is out:
            return a
    return EmuTensor(out)


def dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    plan = _PLANS.get(func) or _plan(func)
    uargs = _host_args(plan, args)  # each argument's device checked, as a GPU checks it
    ukwargs = _host_kwargs(plan, len(args), kwargs) if kwargs else kwargs
    if plan.handler is not None:
        return plan.handler(args, kwargs, uargs, ukwargs)
    kinds = plan.waits(args, kwargs) if plan.waits is not None else ()
    for kind in kinds:
        wait(kind, plan.name)
    if kinds and STATE.wait_timers:  # one call, one wait: timed as its first kind
        out = timed(kinds[0], plan.run, *uargs, **ukwargs)
    else:
        out = plan.run(*uargs, **ukwargs) if kwargs else plan.run(*uargs)
    if kwargs:
        device = kwargs.get("device")
        if device is not None and torch.device(device).type == "cpu":
            return out  # e.g. torch.empty_like(t, device="cpu"): a host tensor
    if type(out) is torch.Tensor:
        return _own(out, args)
    own = {id(a._elem): a for a in args if isinstance(a, EmuTensor)}
    if plan.host_results is not None:
        host = plan.host_results
        return type(out)(o if i in host else _wrap_result(o, own) for i, o in enumerate(out))
    return _wrap_result(out, own)


EmuTensor.door = staticmethod(dispatch)
