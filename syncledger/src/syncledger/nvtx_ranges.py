"""NVTX push/pop: the `nvtx` package when installed, else torch.cuda.nvtx in a CUDA build of torch,
else nothing. Nothing too where the `nvtx` package finds no tool attached (the tool, Nsight
Systems say, is injected when the process starts): a range would go nowhere, and a region
would pay two calls for it."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

PushFn = Callable[[str], None]
PopFn = Callable[[], None]


def _noop_push(name: str) -> None:
    return None


def _noop_pop() -> None:
    return None


def _from_nvtx_package() -> tuple[PushFn, PopFn, str] | None:
    try:
        import nvtx
    except ImportError:
        return None
    domain = nvtx.get_domain("syncledger")
    if not hasattr(domain, "handle"):  # a DummyDomain: no tool is attached to take ranges
        return _noop_push, _noop_pop, "nvtx (no tool attached: ranges skipped)"
    attrs: dict[str, object] = {}  # event attributes are cached per name: building them costs µs

    def push(name: str) -> None:
        a = attrs.get(name)
        if a is None:
            a = attrs[name] = domain.get_event_attributes(message=name)
        domain.push_range(a)

    return push, domain.pop_range, "nvtx"


def _from_torch() -> tuple[PushFn, PopFn, str] | None:
    # A CUDA build's NVTX bindings, which need no device. Asking for one (torch.cuda's
    # is_available) at import would start the CUDA driver, and then no child the program forks
    # could use CUDA: the DP ranks, forked from a server that imported this, among them.
    # The C entry points are bound directly: torch.cuda.nvtx's wrappers add a Python call each.
    nv = getattr(torch._C, "_nvtx", None)
    if nv is None or not hasattr(nv, "rangePushA") or not hasattr(nv, "rangePop"):
        return None
    return nv.rangePushA, nv.rangePop, "torch.cuda.nvtx"


def pick_backend() -> tuple[PushFn, PopFn, str]:
    """Choose once per process; SYNCLEDGER_NVTX=off|nvtx|torch forces a choice."""
    want = os.environ.get("SYNCLEDGER_NVTX", "auto")
    if want == "off":
        return _noop_push, _noop_pop, "off"
    order = {"nvtx": [_from_nvtx_package], "torch": [_from_torch]}.get(
        want, [_from_nvtx_package, _from_torch]
    )
    for make in order:
        got = make()
        if got is not None:
            return got
    return _noop_push, _noop_pop, "off"


PUSH, POP, BACKEND = pick_backend()
MARKS = PUSH is not _noop_push  # whether regions push ranges at all
