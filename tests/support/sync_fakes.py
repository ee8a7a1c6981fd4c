"""Stand-ins for CUDA tensors, for testing the CUDA interceptors on a machine without CUDA."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch

from syncledger import cupti


@dataclass
class StubTensor:
    """What the interceptors look at on a tensor."""

    is_cuda: bool
    nbytes: int = 64
    pinned: bool = False
    contiguous: bool = True
    shape: tuple[int, ...] = (8,)
    calls: list = field(default_factory=list)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda" if self.is_cuda else "cpu")

    def is_pinned(self) -> bool:
        return self.pinned

    def is_contiguous(self) -> bool:
        return self.contiguous


class FakeCupti:
    """The parts of NVIDIA's `cupti.cupti` module the CUPTI detector uses; `fire` makes the
    subscribed callback run as the driver would, on entry to a call."""

    SUBSCRIBER_PARAMS_SIZE = 64

    class CallbackDomain:
        DRIVER_API = 1

    class ApiCallbackSite:
        API_ENTER = 0
        API_EXIT = 1

    class driver_api_trace_cbid:
        cuStreamSynchronize = 100
        cuCtxSynchronize = 101
        cuEventSynchronize = 102
        cuMemcpyDtoH_v2 = 103
        cuMemFree_v2 = 104
        cuMemcpyDtoHAsync_v2 = 105  # not a wait: marks the next stream synchronize a read
        cuLaunchKernel = 200  # not a synchronizing call: never subscribed

    class SubscriberParams:
        struct_size = 0
        subscriber_name = ""
        ptr = 0

    def __init__(self, refuse: Exception | None = None) -> None:
        self.refuse = refuse
        self.callback: Callable[..., None] | None = None
        self.enabled: set[int] = set()
        self.unsubscribed = 0

    def subscribe_v2(self, callback: Callable[..., None], userdata: object, ptr: int) -> str:
        if self.refuse is not None:
            raise self.refuse
        self.callback = callback
        return "subscriber"

    def enable_callback(self, enable: int, sub: object, domain: int, cbid: int) -> None:
        self.enabled.add(cbid)

    def unsubscribe(self, sub: object) -> None:
        self.unsubscribed += 1

    def fire(self, name: str, site: int = 0) -> None:
        cbid = getattr(self.driver_api_trace_cbid, name)
        if cbid in self.enabled and self.callback is not None:
            self.callback(None, self.CallbackDomain.DRIVER_API, cbid, _CallbackData(site))


def use_fake_cupti(monkeypatch: pytest.MonkeyPatch, fake: FakeCupti) -> None:
    """The CUPTI detector unattached and free to attach, with `fake` as NVIDIA's module, and all
    of its process state put back after the test: a fake left behind as its API would take the
    unsubscribe of the real subscription, which then stays attached (on a GPU, through the rest
    of the run)."""
    for name in ("_tried", "_subscriber", "_api", "_names", "_status", "_enter"):
        monkeypatch.setattr(cupti, name, getattr(cupti, name))
    monkeypatch.setattr(cupti, "_tried", False)
    monkeypatch.setattr(cupti, "_subscriber", None)
    monkeypatch.setattr(cupti, "_names", {})
    monkeypatch.setattr(cupti, "_load_api", lambda: fake)
    monkeypatch.delenv("SYNCLEDGER_CUPTI", raising=False)


@dataclass
class _CallbackData:
    callback_site: int


def as_one_c_call(*steps: Callable[[], None]) -> None:
    """Run `steps` (callables that add no frame of their own: partials of this file's or of C
    functions) inside one call of a C function (`map`), as a CUDA op's driver callbacks and its
    sync debug mode warning come from one call: they then share the caller's frame and
    instruction, once this file's own frames are skipped (`SITE_SKIP_FILE`)."""
    list(map(_run, steps))


def _run(step: Callable[[], None]) -> None:
    step()


SITE_SKIP_FILE = __file__
