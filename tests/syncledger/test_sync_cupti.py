"""The CUPTI detector's logic on a machine without a GPU: a stand-in for NVIDIA's cupti module
and for libcupti calls the detector back as the driver would, through a C function pointer
(or cupti-python's own callbacks where it gives no entry points). One event per wait: while
CUPTI is attached it is the detector, and the sync debug mode stays off."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from syncledger import SyncKind, SyncLedger, classify, cupti, hooks
from syncledger.state import STATE
from tests.support.sync_fakes import FakeCupti, skip_fake_frames, use_fake_cupti

SYNC_WARNING = UserWarning("called a synchronizing CUDA operation")
DETACH = cupti.detach


@pytest.fixture(params=["libcupti", "cupti-python"])
def driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCupti]:
    """A process with CUDA (interceptors stubbed, the debug mode's changes recorded in
    `fake.modes`) and CUPTI attached, called back through libcupti or through cupti-python."""
    monkeypatch.setattr(hooks, "_cuda", True)
    monkeypatch.setattr(hooks, "_installed", False)
    monkeypatch.setattr(hooks, "_open", 0)
    monkeypatch.setattr(hooks, "_forced", False)
    monkeypatch.setattr(hooks, "_install", lambda: None)
    monkeypatch.setattr(hooks, "_get_debug_mode", lambda: 0)
    fake = FakeCupti(entry_points=request.param == "libcupti")
    fake.modes = []  # type: ignore[attr-defined]
    monkeypatch.setattr(hooks, "_set_debug_mode", fake.modes.append)  # type: ignore[attr-defined]
    use_fake_cupti(monkeypatch, fake)
    skip_fake_frames(monkeypatch)
    monkeypatch.setattr(classify, "_warned_ops", set())
    monkeypatch.setattr(cupti, "detach", lambda: None)  # no atexit unsubscribe of the fake
    yield fake
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
    with SyncLedger() as led, pytest.warns(RuntimeWarning, match="could not classify"):
        if driver.c_callback is not None:  # no callback data: reading its site fails
            driver.fire_raw(FakeCupti.driver_api_trace_cbid.cuStreamSynchronize, None)
        else:
            assert driver.callback is not None
            driver.callback(None, 1, 100, object())  # no callback_site: the callback breaks
    assert led.events == []


def test_cupti_attached_is_the_one_detector_and_the_debug_mode_stays_the_programs(
    driver: FakeCupti, monkeypatch: pytest.MonkeyPatch
) -> None:
    passed_on: list[object] = []
    with SyncLedger() as led:
        monkeypatch.setattr(hooks, "_next_showwarning", lambda *a: passed_on.append(a[0]))
        warnings.warn(SYNC_WARNING, stacklevel=1)  # the program's own debug mode, say
        driver.fire("cuStreamSynchronize")
    assert [(e.op, e.detector) for e in led.events] == [("cuStreamSynchronize", "cupti")]
    assert passed_on == [SYNC_WARNING]  # shown as the program asked, not recorded
    assert led.detectors == ("interceptor", "cupti")
    assert driver.modes == []  # type: ignore[attr-defined]  # left as the program set it


def test_the_debug_mode_detects_while_cupti_is_paused_under_an_open_ledger(
    driver: FakeCupti, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cupti, "detach", DETACH)
    with SyncLedger() as led:
        with cupti.paused():
            warnings.warn(SYNC_WARNING, stacklevel=1)
            driver.fire("cuStreamSynchronize")  # unsubscribed: never called back
        driver.fire("cuStreamSynchronize")
    assert [(e.op, e.detector) for e in led.events] == [
        ("implicit", "sync_debug_mode"),
        ("cuStreamSynchronize", "cupti"),
    ]
    assert driver.modes == [1, 0]  # type: ignore[attr-defined]  # on while CUPTI was paused


@pytest.mark.parametrize("setting", ["1", "python"])
def test_which_way_cupti_calls_back_is_said(
    driver: FakeCupti, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv("SYNCLEDGER_CUPTI", setting)
    with SyncLedger() as led:
        driver.fire("cuStreamSynchronize")
    through_python = "through cupti-python's own callbacks" in cupti.status()
    assert through_python == (setting == "python" or not driver.with_entry_points)
    assert (driver.c_callback is None) == through_python
    assert [e.detector for e in led.events] == ["cupti"]


@pytest.mark.parametrize(
    "setup,status",
    [
        ("missing", "not installed"),
        ("refused", "could not subscribe (RuntimeError: "),
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
        by_libcupti = "CUPTI ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)"
        status += by_libcupti if driver.with_entry_points else "one subscriber only"
    else:
        monkeypatch.setenv("SYNCLEDGER_CUPTI", "0")
    with SyncLedger() as led:
        driver.fire("cuStreamSynchronize")
    assert led.events == [] and "cupti" not in led.detectors
    assert led.detectors == ("interceptor", "sync_debug_mode")
    assert status in led.describe_detectors()


def test_the_fake_leaves_the_detectors_state_as_it_found_it() -> None:
    """A fake left as the detector's API would take the unsubscribe of a real subscription made
    before it, which would then stay attached."""
    # its own list, not the helper's: a name dropped from the helper must fail here
    names = (
        *("_tried", "_subscriber", "_api", "_binding", "_names", "_status", "_failures"),
        *("_load_api", "_load_entry_points"),
    )
    before = {n: getattr(cupti, n) for n in names}
    with pytest.MonkeyPatch.context() as mp:
        fake = FakeCupti()
        use_fake_cupti(mp, fake)
        assert cupti.attach() and cupti._api is fake
        cupti._failures += 1
    assert {n: getattr(cupti, n) for n in names} == before
