"""Stand-ins for CUDA tensors, for testing the CUDA interceptors on a machine without CUDA."""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from syncledger import cupti, events


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
    """The parts of NVIDIA's `cupti.cupti` module the CUPTI detector uses, and of libcupti
    itself: `fire` makes the subscribed callback run as the driver would, on entry to a call
    and on its exit. With `entry_points` (the default, as cupti-python 13 gives them) the
    detector subscribes through libcupti's C functions, here C-callable stand-ins, and is called
    back through a C function pointer with a pointer to the callback data; without, through
    cupti-python's own `subscribe_v2` and Python callback."""

    SUBSCRIBER_PARAMS_SIZE = 64

    class CallbackDomain:
        DRIVER_API = 1

    class ApiCallbackSite:
        API_ENTER = 0
        API_EXIT = 1

    class Result(enum.IntEnum):
        ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39

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

    def __init__(self, refuse: Exception | None = None, entry_points: bool = True) -> None:
        self.refuse = refuse
        self.with_entry_points = entry_points
        self.callback: Callable[..., None] | None = None  # cupti-python's: a Python function
        self.c_callback: int | None = None  # libcupti's: a C function's address
        self.enabled: set[int] = set()
        self.unsubscribed = 0
        self._c_functions: list[object] = []  # kept alive while the detector holds their address

    # cupti-python's API
    def subscribe_v2(self, callback: Callable[..., None], userdata: object, ptr: int) -> str:
        if self.refuse is not None:
            raise self.refuse
        self.callback = callback
        return "subscriber"

    def enable_callback(self, enable: int, sub: object, domain: int, cbid: int) -> None:
        self.enabled.add(cbid)

    def unsubscribe(self, sub: object) -> None:
        self._unsubscribed()

    def _unsubscribed(self) -> None:
        """As CUPTI does: no callback from now on, until subscribed again."""
        self.unsubscribed += 1
        self.callback = self.c_callback = None
        self.enabled.clear()

    # libcupti's C functions, as cupti-python's table of entry points gives their addresses
    def entry_points(self) -> dict[str, int]:
        if not self.with_entry_points:
            raise AttributeError("this cupti-python gives no entry points")

        def subscribe(handle: Any, callback: int, userdata: int | None) -> int:
            if self.refuse is not None:
                return int(self.Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            self.c_callback = callback
            handle[0] = 0x5B
            return 0

        def enable(enable: int, sub: int, domain: int, cbid: int) -> int:
            self.enabled.add(cbid)
            return 0

        def unsubscribe(sub: int) -> int:
            self._unsubscribed()
            return 0

        functions = {
            "__cuptiSubscribe": _C_SUBSCRIBE(subscribe),
            "__cuptiEnableCallback": _C_ENABLE(enable),
            "__cuptiUnsubscribe": _C_UNSUBSCRIBE(unsubscribe),
        }
        self._c_functions += functions.values()
        return {name: ctypes.cast(f, ctypes.c_void_p).value or 0 for name, f in functions.items()}

    def fire(self, name: str, site: int = 0) -> None:
        """The driver calls `name`: its callback at `site` (entry, by default)."""
        cbid = getattr(self.driver_api_trace_cbid, name)
        if cbid not in self.enabled:
            return
        if self.c_callback is not None:
            data = _CallbackDataStruct(site)
            self.fire_raw(cbid, ctypes.addressof(data))
        elif self.callback is not None:
            self.callback(None, self.CallbackDomain.DRIVER_API, cbid, _CallbackData(site))

    def fire_raw(self, cbid: int, cbdata: int | None) -> None:
        """Call the C callback as libcupti would, with `cbdata` as the data's address."""
        assert self.c_callback is not None
        _C_CALLBACK(self.c_callback)(None, self.CallbackDomain.DRIVER_API, cbid, cbdata)


def use_fake_cupti(monkeypatch: pytest.MonkeyPatch, fake: FakeCupti) -> None:
    """The CUPTI detector unattached and free to attach, with `fake` as NVIDIA's module and
    libcupti, and all of its process state put back after the test: a fake left behind as its
    API would take the unsubscribe of the real subscription, which then stays attached (on a
    GPU, through the rest of the run)."""
    names = ("_tried", "_subscriber", "_api", "_binding", "_names", "_status", "_failures")
    for name in names:
        monkeypatch.setattr(cupti, name, getattr(cupti, name))
    monkeypatch.setattr(cupti, "_tried", False)
    monkeypatch.setattr(cupti, "_subscriber", None)
    monkeypatch.setattr(cupti, "_names", {})
    monkeypatch.setattr(cupti, "_failures", 0)
    monkeypatch.setattr(cupti, "_load_api", lambda: fake)
    monkeypatch.setattr(cupti, "_load_entry_points", fake.entry_points)
    monkeypatch.delenv("SYNCLEDGER_CUPTI", raising=False)


def skip_fake_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """This file's frames are machinery for the test (a fake driver call stands for a C one,
    which has no Python frame): events name the test's line."""
    monkeypatch.setattr(events, "_SKIP_FILES", {*events._SKIP_FILES, __file__})
    monkeypatch.setattr(events, "_MACHINERY", {})
    monkeypatch.setattr(events, "_MACHINERY_MODULES", {})


class _CallbackDataStruct(ctypes.Structure):
    _fields_ = [("callbackSite", ctypes.c_int)]  # CUpti_CallbackData's first field


_C_CALLBACK = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p
)
_C_SUBSCRIBE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p
)
_C_ENABLE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
)
_C_UNSUBSCRIBE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


@dataclass
class _CallbackData:
    callback_site: int
