"""The CUPTI detector: driver-API callbacks on the synchronizing calls only.

The Python interceptors and PyTorch's sync debug mode see the syncs that pass through PyTorch's
Python bindings; a C++ extension (torchvision's NMS, sgl-kernel, FlashInfer's planning) that
synchronizes by itself passes through neither. The CUDA driver sees every one. NVIDIA's
`cupti-python` (an optional extra: `pip install .[cupti]`) calls back into Python on the driver
calls subscribed here, on the thread that made them, so the Python stack at that moment names
the line that called into the extension. Only synchronizing calls are subscribed, so a kernel
launch or an asynchronous copy costs nothing.

One event per wait, never two:
- inside an interceptor that records its own call (a copy, a synchronize), CUPTI stays silent;
- inside a call an interceptor names (`item`, indexing), the event takes that name and kind;
- elsewhere the driver call decides the kind (a stream synchronize made by an extension is
  `explicit`), and the sync debug mode's warning that PyTorch raises for the same call, at the
  same Python frame and instruction, only renames it (an implicit device read inside an op);
- a stream synchronize right after an asynchronous copy to the host on the same thread is a
  device read: ATen's `.item()`, `.cpu()` and `tolist` are exactly that pair of driver calls
  (measured on an H200), also where a C++ extension makes them and no warning reaches Python.
  The copy itself is subscribed for this only; it is not a wait.

Where `cupti-python` is missing, cannot subscribe (another tool holds CUPTI's one subscriber),
or `SYNCLEDGER_CUPTI=0` is set, the ledger works without it and `status()` says why.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from syncledger.classify import classification_failed, implicit_kind
from syncledger.events import SyncEvent, SyncKind, call_site
from syncledger.record import record_sync
from syncledger.state import STATE, open_ledgers, watching

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
_STREAM_SYNCS = frozenset({"cuStreamSynchronize", "cuStreamSynchronize_ptsz"})
_ENV = "SYNCLEDGER_CUPTI"
_PENDING_MAX = 8  # recent CUPTI events a later warning of the same call may rename

_lock = threading.Lock()
_tried = False
_subscriber: Any = None
_api: Any = None
_names: dict[int, str] = {}  # callback id -> driver function
_enter = 0  # CUPTI_API_ENTER
_status = "not attached: no ledger has been opened on CUDA yet"
_failures = 0
_driver_calls = 0  # synchronizing driver calls seen, every thread, ledger or not


class _Pending(threading.local):
    """This thread's recent CUPTI events: (call site, event, whether an interceptor named it),
    and whether its last subscribed driver call was an asynchronous copy to the host."""

    def __init__(self) -> None:
        self.events: list[tuple[tuple[int, int] | None, SyncEvent, bool]] = []
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


def attach(api: Any = None) -> bool:
    """Subscribe once per process (at the first ledger opened on CUDA); False when it cannot.
    `api` replaces `cupti.cupti` (tests)."""
    global _tried, _subscriber, _api, _status, _enter
    with _lock:
        if _tried:
            return _subscriber is not None
        _tried = True
        if os.environ.get(_ENV, "1") == "0":
            _status = f"off ({_ENV}=0)"
            return False
        try:
            api = api if api is not None else _load_api()
        except ImportError:
            _status = "not installed: pip install cupti-python (the [cupti] extra)"
            return False
        try:
            _subscriber = _subscribe(api)
        except Exception as exc:  # another subscriber, no driver, an old CUPTI...
            _status = f"could not subscribe ({type(exc).__name__}: {exc})"
            return False
        _api = api
        _enter = int(api.ApiCallbackSite.API_ENTER)
        waits = sum(1 for n in _names.values() if n in SYNC_CALLS)
        _status = f"attached: driver-API callbacks on {waits} synchronizing calls"
        atexit.register(detach)
        return True


def _subscribe(api: Any) -> Any:
    cbids = api.driver_api_trace_cbid
    names = (*SYNC_CALLS, *COPY_TO_HOST_CALLS)
    wanted = {int(getattr(cbids, n)): n for n in names if hasattr(cbids, n)}
    if hasattr(api, "subscribe_v2"):
        params = api.SubscriberParams()
        params.struct_size = api.SUBSCRIBER_PARAMS_SIZE
        params.subscriber_name = "syncledger"
        sub = api.subscribe_v2(_callback, None, params.ptr)
    else:
        sub = api.subscribe(_callback, None)
    try:
        for cbid in wanted:
            api.enable_callback(1, sub, api.CallbackDomain.DRIVER_API, cbid)
    except Exception:
        api.unsubscribe(sub)
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
            _api.unsubscribe(_subscriber)
        except Exception as exc:
            warnings.warn(f"syncledger: CUPTI unsubscribe failed: {exc}", RuntimeWarning, 2)
        _subscriber = None
        _status = "detached"


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


def _callback(userdata: Any, domain: Any, cbid: int, cbdata: Any) -> None:
    global _failures, _driver_calls
    try:
        if int(cbdata.callback_site) != _enter:  # once per call, before it waits
            return
        name = _names.get(int(cbid))
        if name is None:
            return
        pending = _PENDING
        after_copy, pending.copy_to_host = pending.copy_to_host, name in COPY_TO_HOST_CALLS
        if pending.copy_to_host:
            return
        _driver_calls += 1
        # inside an interceptor's own call record_sync records nothing; on the emulated device
        # its door records each wait by CUDA's rules, and a real driver call is the harness's own
        if not watching() or STATE.emulated:
            return
        named = STATE.op is not None
        if named:
            kind = implicit_kind()
        elif after_copy and name in _STREAM_SYNCS:
            kind = SyncKind.D2H_READ
        else:
            kind = SYNC_CALLS[name]
        event = record_sync(kind, name, skip=2, detector="cupti")
        if event is not None:
            pending.events.append((call_site(2), event, named))
            del pending.events[:-_PENDING_MAX]
    except Exception as exc:  # a callback must never fail the driver call it watches
        _failures += 1
        if _failures == 1:
            classification_failed("a CUPTI callback", exc)


def claim(site: tuple[int, int] | None) -> bool:
    """A sync debug mode warning raised at `site`: True when CUPTI already recorded that wait
    (an unnamed one becomes an implicit read inside an op, the warning's kind); else False."""
    pending = _PENDING.events
    if not pending or site is None:
        return False
    for i, (seen_at, event, named) in enumerate(pending):
        if seen_at == site:
            del pending[: i + 1]
            if not named:
                _rename(event, dataclasses.replace(event, kind=implicit_kind(), op="implicit"))
            return True
    pending.clear()  # an older call's waits: no later warning can be theirs
    return False


def _rename(old: SyncEvent, new: SyncEvent) -> None:
    for ledger in open_ledgers():
        events = ledger.events
        for i in range(len(events) - 1, -1, -1):
            if events[i] is old:
                events[i] = new
                break
