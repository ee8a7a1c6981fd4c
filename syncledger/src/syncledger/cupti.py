"""The CUPTI detector: driver-API callbacks on the synchronizing calls only.

The Python interceptors and PyTorch's sync debug mode see the syncs that pass through PyTorch's
Python bindings; a C++ extension (torchvision's NMS, sgl-kernel, FlashInfer's planning) that
synchronizes by itself passes through neither. The CUDA driver sees every one. NVIDIA's
`cupti-python` (an optional extra: `pip install .[cupti]`) calls back into Python on the driver
calls subscribed here, on the thread that made them, so the Python stack at that moment names
the line that called into the extension. Only synchronizing calls are subscribed, so a kernel
launch or an asynchronous copy costs nothing.

One event per wait, never two: while CUPTI is attached it is the one detector of the waits it
sees, and PyTorch's sync debug mode stays off (`syncledger.hooks`):
- inside an interceptor that records its own call (a copy, a synchronize), CUPTI stays silent;
- inside a call an interceptor names (`item`, indexing), the event takes that name and kind;
- elsewhere the driver call decides the kind: a stream synchronize right after an asynchronous
  copy to the host on the same thread is a device read, which is how ATen's `.item()`, `.cpu()`
  and `tolist` look to the driver (measured on an H200), also where a C++ extension makes them;
  any other synchronize is `explicit`. The copy itself is subscribed for this only; it is not
  a wait.

CUPTI calls back at the entry and at the exit of every subscribed call. cupti-python hands each
callback its data as an object built on numpy, which costs microseconds to make and to read (a
`.item()` is four callbacks), so the callbacks are taken from libcupti directly, through a
ctypes function, in the library cupti-python loaded (its table of entry points); the callback
site is read from the data's first field. Where this cupti-python gives no such table, or
`SYNCLEDGER_CUPTI=python` asks for them, its own callbacks are used, and `status()` says so.

Where `cupti-python` is missing, cannot subscribe (another tool holds CUPTI's one subscriber),
or `SYNCLEDGER_CUPTI=0` is set, the ledger works without it and `status()` says why.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from syncledger.classify import classification_failed, implicit_kind
from syncledger.events import SyncKind
from syncledger.record import record_sync
from syncledger.state import PROCESS_LEDGERS, STATE

# The driver calls that make the host wait, and the kind of a wait no interceptor names.
SYNC_CALLS: dict[str, SyncKind] = {
    "cuStreamSynchronize": SyncKind.EXPLICIT,
    "cuStreamSynchronize_ptsz": SyncKind.EXPLICIT,
    "cuCtxSynchronize": SyncKind.EXPLICIT,
    "cuCtxSynchronize_v2": SyncKind.EXPLICIT,
    "cuEventSynchronize": SyncKind.EXPLICIT,
    "cuMemcpy": SyncKind.D2H_READ,
    "cuMemcpy_ptds": SyncKind.D2H_READ,
    "cuMemcpyDtoH_v2": SyncKind.D2H_READ,
    "cuMemcpyDtoH_v2_ptds": SyncKind.D2H_READ,
    "cuMemcpyHtoD_v2": SyncKind.H2D_BLOCKING,
    "cuMemcpyHtoD_v2_ptds": SyncKind.H2D_BLOCKING,
    "cuMemcpy2D_v2": SyncKind.D2H_READ,
    "cuMemcpy3D_v2": SyncKind.D2H_READ,
    "cuMemFree_v2": SyncKind.ALLOCATOR,
    "cuMemFreeHost": SyncKind.ALLOCATOR,
}
# Asynchronous copies to the host: not waits, but the stream synchronize that follows one waits
# for a device read.
COPY_TO_HOST_CALLS = ("cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz")
_COPIES = frozenset(COPY_TO_HOST_CALLS)
_STREAM_SYNCS = frozenset({"cuStreamSynchronize", "cuStreamSynchronize_ptsz"})
_ENV = "SYNCLEDGER_CUPTI"
_DRIVER_API = 1  # CUPTI_CB_DOMAIN_DRIVER_API
_ENTER = 0  # CUPTI_API_ENTER, the callback data's first field (CUpti_CallbackData.callbackSite)

_lock = threading.Lock()
_tried = False
_subscriber: Any = None
_api: Any = None  # cupti-python's module
_binding: Any = None  # what subscribed: _Libcupti, or _CuptiPython
_names: dict[int, str] = {}  # callback id -> driver function
_status = "not attached: no ledger has been opened on CUDA yet"
_failures = 0
_driver_calls = 0  # synchronizing driver calls seen, every thread, ledger or not
# called after CUPTI attaches or detaches (the hooks switch the sync debug mode to match)
ON_CHANGE: list[Callable[[], None]] = []


class _Pending(threading.local):
    """Whether this thread's last subscribed driver call was an asynchronous copy to the host."""

    def __init__(self) -> None:
        self.copy_to_host = False


_PENDING = _Pending()


def attached() -> bool:
    return _subscriber is not None


def driver_calls() -> int:
    """How many synchronizing driver calls CUPTI has seen in this process (0 unattached): the
    driver's own count, to hold a ledger's against."""
    return _driver_calls


def status() -> str:
    """Whether CUPTI sees this process's syncs, or why not."""
    return _status


def _load_api() -> Any:
    from cupti import cupti as api  # optional: the [cupti] extra

    return api


def _load_entry_points() -> Mapping[str, int]:
    """The addresses of libcupti's functions in the library cupti-python loaded (loading it)."""
    from cupti._internal import cupti as internal

    return internal._inspect_function_pointers()


def attach(api: Any = None) -> bool:
    """Subscribe once per process (at the first ledger opened on CUDA); False when it cannot.
    `api` replaces `cupti.cupti` (tests)."""
    global _tried, _subscriber, _api, _binding, _status
    if _tried:
        return _subscriber is not None
    with _lock:
        if _tried:
            return _subscriber is not None
        _tried = True
        setting = os.environ.get(_ENV, "1")
        if setting == "0":
            _status = f"off ({_ENV}=0)"
            return False
        try:
            api = api if api is not None else _load_api()
        except ImportError:
            _status = "not installed: pip install cupti-python (the [cupti] extra)"
            return False
        try:
            binding = _CuptiPython(api) if setting == "python" else _bind(api)
            _subscriber = _subscribe(api, binding)
        except Exception as exc:  # another subscriber, no driver, an old CUPTI...
            _status = f"could not subscribe ({type(exc).__name__}: {exc})"
            return False
        _api, _binding = api, binding
        waits = sum(1 for n in _names.values() if n in SYNC_CALLS)
        _status = f"attached: driver-API callbacks on {waits} synchronizing calls{binding.note}"
        atexit.register(detach)
    _changed()
    return True


def _changed() -> None:
    for fn in ON_CHANGE:
        fn()


def _bind(api: Any) -> Any:
    """libcupti called directly where cupti-python tells its entry points, else cupti-python."""
    try:
        return _Libcupti(_load_entry_points(), api)
    except (ImportError, AttributeError, KeyError):
        return _CuptiPython(api)


def _subscribe(api: Any, binding: Any) -> Any:
    cbids = api.driver_api_trace_cbid
    names = (*SYNC_CALLS, *COPY_TO_HOST_CALLS)
    wanted = {int(getattr(cbids, n)): n for n in names if hasattr(cbids, n)}
    sub = binding.subscribe()
    try:
        for cbid in wanted:
            binding.enable(sub, cbid)
    except Exception:
        binding.unsubscribe(sub)
        raise
    _names.clear()
    _names.update(wanted)
    return sub


def detach() -> None:
    """Unsubscribe (at exit, or before a tool that needs CUPTI's one subscriber itself)."""
    global _subscriber, _status
    with _lock:
        if _subscriber is None:
            return
        try:
            _binding.unsubscribe(_subscriber)
        except Exception as exc:
            warnings.warn(f"syncledger: CUPTI unsubscribe failed: {exc}", RuntimeWarning, 2)
        _subscriber = None
        _status = "detached"
    _changed()


@contextmanager
def paused() -> Iterator[None]:
    """Leave CUPTI to another tool for the block, then subscribe again where CUPTI lets us. The
    PyTorch profiler keeps its subscription once it has run (on CUDA 13 here), so after it the
    detector stays off and `status()` says why: run the profiler after the ledgers."""
    global _tried
    was = attached()
    detach()
    try:
        yield
    finally:
        if was:
            with _lock:
                _tried = False
            attach(_api)


# ---- the two ways to be called back --------------------------------------------------------

# void (*CUpti_CallbackFunc)(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
#                            const void *cbdata)
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
_SUBSCRIBE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), _CALLBACK, ctypes.c_void_p
)
_ENABLE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
)
_UNSUBSCRIBE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_site_at = ctypes.c_int.from_address


class _Libcupti:
    """libcupti's own subscribe, enable and unsubscribe, called back through a ctypes function."""

    note = ""

    def __init__(self, entry_points: Mapping[str, int], api: Any) -> None:
        at = {name.lstrip("_"): address for name, address in entry_points.items() if address}
        self._subscribe = _SUBSCRIBE(at["cuptiSubscribe"])
        self._enable = _ENABLE(at["cuptiEnableCallback"])
        self._unsubscribe = _UNSUBSCRIBE(at["cuptiUnsubscribe"])
        self._api = api

    def _check(self, result: int) -> None:
        if result:
            try:
                name = self._api.Result(result).name
            except Exception:
                name = "error"
            raise RuntimeError(f"CUPTI {name} ({result})")

    def subscribe(self) -> int:
        handle = ctypes.c_void_p()
        self._check(self._subscribe(ctypes.byref(handle), _C_CALLBACK, None))
        if handle.value is None:
            raise RuntimeError("CUPTI gave no subscriber")
        return handle.value

    def enable(self, handle: int, cbid: int) -> None:
        self._check(self._enable(1, handle, _DRIVER_API, cbid))

    def unsubscribe(self, handle: int) -> None:
        self._check(self._unsubscribe(handle))


class _CuptiPython:
    """cupti-python's own subscription: each callback's data comes as a numpy-built object."""

    note = " (through cupti-python's own callbacks)"

    def __init__(self, api: Any) -> None:
        self._api = api

    def subscribe(self) -> Any:
        api = self._api
        if hasattr(api, "subscribe_v2"):
            params = api.SubscriberParams()
            params.struct_size = api.SUBSCRIBER_PARAMS_SIZE
            params.subscriber_name = "syncledger"
            return api.subscribe_v2(_py_callback, None, params.ptr)
        return api.subscribe(_py_callback, None)

    def enable(self, handle: Any, cbid: int) -> None:
        self._api.enable_callback(1, handle, self._api.CallbackDomain.DRIVER_API, cbid)

    def unsubscribe(self, handle: Any) -> None:
        self._api.unsubscribe(handle)


def _c_callback(userdata: int | None, domain: int, cbid: int, cbdata: int | None) -> None:
    try:
        if _site_at(cbdata).value == _ENTER:  # type: ignore[arg-type]  # once per call, before it waits
            _entered(cbid)
    except Exception as exc:  # a callback must never fail the driver call it watches
        _failed(exc)


_C_CALLBACK = _CALLBACK(_c_callback)  # kept alive here: libcupti holds only its address


def _py_callback(userdata: Any, domain: Any, cbid: int, cbdata: Any) -> None:
    try:
        if int(cbdata.callback_site) == _ENTER:
            _entered(int(cbid))
    except Exception as exc:
        _failed(exc)


def _entered(cbid: int) -> None:
    """A subscribed driver call begins on this thread: count it, and record it where a ledger
    records this thread and no interceptor records the call itself."""
    global _driver_calls
    name = _names.get(cbid)
    if name is None:
        return
    pending = _PENDING
    after_copy = pending.copy_to_host
    pending.copy_to_host = name in _COPIES
    if pending.copy_to_host:
        return
    _driver_calls += 1
    st = STATE
    # inside an interceptor's own call record_sync records nothing; on the emulated device
    # its door records each wait by CUDA's rules, and a real driver call is the harness's own
    if st.emulated or not (st.ledgers or PROCESS_LEDGERS):
        return
    if st.op is not None:
        kind = implicit_kind()
    elif after_copy and name in _STREAM_SYNCS:
        kind = SyncKind.D2H_READ
    else:
        kind = SYNC_CALLS[name]
    record_sync(kind, name, skip=3, detector="cupti")


def _failed(exc: Exception) -> None:
    global _failures
    _failures += 1
    if _failures == 1:
        classification_failed("a CUPTI callback", exc)
