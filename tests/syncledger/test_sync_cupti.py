"""The CUPTI detector's logic on a machine without a GPU: a stand-in for NVIDIA's cupti module
calls the detector back as the driver would. One event per wait, whichever detectors see it."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from functools import partial

import pytest

from syncledger import SyncKind, SyncLedger, cupti, events, hooks
from syncledger.state import STATE
from tests.support.sync_fakes import SITE_SKIP_FILE, FakeCupti, as_one_c_call, use_fake_cupti

SYNC_WARNING = UserWarning("called a synchronizing CUDA operation")


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCupti]:
    """A process with CUDA (interceptors and debug mode stubbed) and CUPTI attached."""
    monkeypatch.setattr(hooks, "_cuda", True)
    monkeypatch.setattr(hooks, "_installed", False)
    monkeypatch.setattr(hooks, "_open", 0)
    monkeypatch.setattr(hooks, "_install", lambda: None)
    monkeypatch.setattr(hooks, "_get_debug_mode", lambda: 0)
    monkeypatch.setattr(hooks, "_set_debug_mode", lambda mode: None)
    monkeypatch.setattr(events, "_SITE_SKIP", (*events._SITE_SKIP, SITE_SKIP_FILE))
    monkeypatch.setattr(events, "_SKIP_FILES", {*events._SKIP_FILES, SITE_SKIP_FILE})
    fake = FakeCupti()
    use_fake_cupti(monkeypatch, fake)
    monkeypatch.setattr(cupti, "detach", lambda: None)  # no atexit unsubscribe of the fake
    yield fake
    cupti._PENDING.events.clear()
    cupti._PENDING.copy_to_host = False


def test_only_synchronizing_calls_and_copies_to_the_host_are_subscribed(driver: FakeCupti) -> None:
    with SyncLedger() as led:
        pass
    ids = FakeCupti.driver_api_trace_cbid
    assert ids.cuStreamSynchronize in driver.enabled and ids.cuMemFree_v2 in driver.enabled
    assert ids.cuMemcpyDtoHAsync_v2 in driver.enabled
    assert ids.cuLaunchKernel not in driver.enabled
    assert "cupti" in led.detectors and "attached" in cupti.status()


def test_a_sync_inside_an_extension_is_seen_at_the_python_line(driver: FakeCupti) -> None:
    with SyncLedger() as led:
        driver.fire("cuStreamSynchronize")  # an extension's own cudaStreamSynchronize
        driver.fire("cuStreamSynchronize", site=FakeCupti.ApiCallbackSite.API_EXIT)
        driver.fire("cuLaunchKernel")
    [event] = led.events
    assert (event.kind, event.op, event.detector) == (
        SyncKind.EXPLICIT,
        "cuStreamSynchronize",
        "cupti",
    )
    assert event.function == "test_a_sync_inside_an_extension_is_seen_at_the_python_line"


def test_a_copy_to_the_host_then_a_stream_synchronize_is_one_device_read(
    driver: FakeCupti,
) -> None:
    # ATen's .item() inside an extension, as the driver sees it; its warning never reaches Python
    with SyncLedger() as led:
        before = cupti.driver_calls()
        driver.fire("cuMemcpyDtoHAsync_v2")
        driver.fire("cuStreamSynchronize")
        driver.fire("cuStreamSynchronize")  # the mark is for the next wait only
        driver.fire("cuMemcpyDtoHAsync_v2")
        driver.fire("cuCtxSynchronize")  # a device-wide synchronize stays explicit
    assert [(e.kind, e.op) for e in led.events] == [
        (SyncKind.D2H_READ, "cuStreamSynchronize"),
        (SyncKind.EXPLICIT, "cuStreamSynchronize"),
        (SyncKind.EXPLICIT, "cuCtxSynchronize"),
    ]
    assert cupti.driver_calls() == before + 3  # the copies are not waits


def test_the_debug_mode_warning_of_the_same_call_renames_it_not_adds(driver: FakeCupti) -> None:
    with SyncLedger() as led:
        as_one_c_call(
            partial(driver.fire, "cuStreamSynchronize"), partial(warnings.warn, SYNC_WARNING)
        )
    assert [(e.kind, e.op, e.detector) for e in led.events] == [
        (SyncKind.D2H_READ, "implicit", "cupti")
    ]


def test_a_warning_cupti_did_not_see_is_recorded_by_the_debug_mode(driver: FakeCupti) -> None:
    with SyncLedger() as led:
        driver.fire("cuStreamSynchronize")  # an earlier, unrelated call
        warnings.warn(SYNC_WARNING, stacklevel=1)  # another call: not the same wait
    assert [(e.op, e.detector) for e in led.events] == [
        ("cuStreamSynchronize", "cupti"),
        ("implicit", "sync_debug_mode"),
    ]


def test_a_named_call_keeps_its_name_and_its_warning_is_consumed(driver: FakeCupti) -> None:
    with SyncLedger() as led:
        STATE.op = "item"
        try:
            as_one_c_call(
                partial(driver.fire, "cuMemcpyDtoH_v2"), partial(warnings.warn, SYNC_WARNING)
            )
        finally:
            STATE.op = None
    assert [(e.kind, e.op) for e in led.events] == [(SyncKind.D2H_READ, "item")]


def test_an_interceptor_recording_its_own_call_silences_cupti(driver: FakeCupti) -> None:
    with SyncLedger() as led:
        before = cupti.driver_calls()
        STATE.suppress += 1
        try:
            driver.fire("cuCtxSynchronize")
        finally:
            STATE.suppress -= 1
    assert led.events == [] and cupti.driver_calls() == before + 1


def test_on_the_emulated_device_a_real_driver_call_is_the_harness_own(driver: FakeCupti) -> None:
    # on a GPU machine the emulated device's own machinery may call the driver; its door has
    # already recorded the wait by CUDA's rules
    with SyncLedger() as led:
        STATE.emulated += 1
        try:
            driver.fire("cuEventSynchronize")
        finally:
            STATE.emulated -= 1
        driver.fire("cuEventSynchronize")
    assert [e.op for e in led.events] == ["cuEventSynchronize"]


def test_a_failing_callback_never_reaches_the_driver_call(driver: FakeCupti) -> None:
    with SyncLedger() as led:
        assert driver.callback is not None
        with pytest.warns(RuntimeWarning, match="could not classify"):
            driver.callback(None, 1, 100, object())  # no callback_site: the callback breaks
    assert led.events == []


@pytest.mark.parametrize(
    "setup,status",
    [
        ("missing", "not installed"),
        ("refused", "could not subscribe (RuntimeError: one subscriber only)"),
        ("off", "off (SYNCLEDGER_CUPTI=0)"),
    ],
)
def test_without_cupti_the_ledger_says_why(
    driver: FakeCupti, monkeypatch: pytest.MonkeyPatch, setup: str, status: str
) -> None:
    if setup == "missing":

        def missing() -> None:
            raise ImportError("No module named 'cupti'")

        monkeypatch.setattr(cupti, "_load_api", missing)
    elif setup == "refused":
        driver.refuse = RuntimeError("one subscriber only")
    else:
        monkeypatch.setenv("SYNCLEDGER_CUPTI", "0")
    with SyncLedger() as led:
        driver.fire("cuStreamSynchronize")
    assert led.events == [] and "cupti" not in led.detectors
    assert status in led.describe_detectors()


def test_the_fake_leaves_the_detectors_state_as_it_found_it() -> None:
    """A fake left as the detector's API would take the unsubscribe of a real subscription made
    before it, which would then stay attached."""
    # its own list, not the helper's: a name dropped from the helper must fail here
    names = ("_tried", "_subscriber", "_api", "_names", "_status", "_enter", "_load_api")
    before = {n: getattr(cupti, n) for n in names}
    with pytest.MonkeyPatch.context() as mp:
        fake = FakeCupti()
        use_fake_cupti(mp, fake)
        assert cupti.attach() and cupti._api is fake
    assert {n: getattr(cupti, n) for n in names} == before
