"""Regions, tags, threads, nesting, budgets and bad usage of the ledger."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest
import torch

from syncledger import (
    EmulationError,
    SyncBudgetExceeded,
    SyncKind,
    SyncLedger,
    current_region,
    emulated_device,
    max_syncs,
    region,
    region_timer,
    set_step,
    tags,
)
from tests.support.pytester_runs import run_inner

pytest_plugins = ["pytester"]


def test_regions_nest_and_events_carry_path_step_and_tags() -> None:
    with emulated_device() as dev, SyncLedger() as led:
        x = torch.ones(4, device=dev)
        set_step(7)
        with region("step"):
            assert current_region() == "step"
            with region("metadata", "out_graph"), tags(forward_mode="DECODE", path="graph"):
                assert current_region() == "step/metadata/out_graph"
                x.sum().item()
            with region("forward"):
                x.tolist()
            assert current_region() == "step"
        set_step(None)
        x.cpu()
    assert current_region() == ""
    first, second, third = led.events
    assert (first.region, first.step, first.tag_dict) == (
        "step/metadata/out_graph",
        7,
        {"forward_mode": "DECODE", "path": "graph"},
    )
    assert (second.region, second.step, second.tags) == ("step/forward", 7, ())
    assert (third.region, third.step) == ("", None)
    entered = [(e.region, e.step) for e in led.region_entries]
    assert entered == [("step", 7), ("step/metadata/out_graph", 7), ("step/forward", 7)]


def test_another_thread_is_not_recorded() -> None:
    with emulated_device() as dev:
        x = torch.arange(3, device=dev)
        with SyncLedger() as led:
            t = threading.Thread(target=lambda: x.sum().item())
            t.start()
            t.join()
            x.max().item()
    assert len(led.events) == 1


def test_nested_ledgers_record_in_both() -> None:
    with emulated_device() as dev:
        x = torch.arange(3, device=dev)
        with SyncLedger() as outer:
            x.tolist()
            with SyncLedger() as inner:
                x.sum().item()
    assert len(outer.events) == 2
    assert len(inner.events) == 1
    assert inner.events[0] is outer.events[1]


def test_max_syncs_raises_with_location_and_region() -> None:
    with emulated_device() as dev:
        x = torch.arange(3, device=dev)
        with pytest.raises(SyncBudgetExceeded) as info, max_syncs(1), region("hot"):
            x.sum().item()
            x.tolist()
    msg = str(info.value)
    assert "2 host-device syncs, budget 1" in msg
    assert "d2h_read tolist" in msg
    assert "tests/syncledger/test_sync_ledger.py:" in msg
    assert "[region hot]" in msg


def test_max_syncs_counts_only_the_given_kinds() -> None:
    with emulated_device(claim_cuda=True) as dev:  # its torch.cuda.synchronize on any machine
        x = torch.arange(3, device=dev)
        with max_syncs(0, kinds=[SyncKind.EXPLICIT]):
            x.sum().item()
        with pytest.raises(SyncBudgetExceeded), max_syncs(0, kinds="explicit"):
            torch.cuda.synchronize()


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_max_syncs_rejects_bad_budgets(bad: object) -> None:
    with pytest.raises(ValueError, match="non-negative int"):
        max_syncs(bad)  # type: ignore[arg-type]


def test_an_empty_kinds_list_is_refused() -> None:
    """A budget on no kind could never fail."""
    with pytest.raises(ValueError, match="the list is empty"):
        max_syncs(0, kinds=[])
    with pytest.raises(ValueError, match="the list is empty"):
        SyncLedger().count([])


def test_within_counts_only_syncs_made_through_the_named_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "within_ops_pkg"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("def longest(x):\n    return int(x.max())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ops = importlib.import_module(name)
    try:
        with emulated_device() as dev:
            x = torch.tensor([3, 1], device=dev)
            with SyncLedger() as led:
                x.tolist()  # the caller's own read
                ops.longest(x)
            assert (led.count(), led.count(within=name)) == (2, 1)
            assert led.count(within=[str(tmp_path / name)]) == 1  # a folder, by path
            with max_syncs(0, within=name):
                x.tolist()
            over = pytest.raises(SyncBudgetExceeded, match=f"1 host-device syncs within {name}")
            with over, max_syncs(0, within=name):
                ops.longest(x)
    finally:
        sys.modules.pop(name, None)
    for bad, message in (([], "within is empty"), ("no/such/dir", "no such file or folder")):
        with pytest.raises(ValueError, match=message):
            max_syncs(0, within=bad)
    with pytest.raises(ValueError, match="not an importable module"):
        max_syncs(0, within="no_such_package_here")


def test_closing_a_ledger_on_another_thread_is_an_error() -> None:
    led = SyncLedger().__enter__()
    errors: list[BaseException] = []

    def close() -> None:
        try:
            led.__exit__(None, None, None)
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=close)
    t.start()
    t.join()
    led.__exit__(None, None, None)
    assert errors and "different thread" in str(errors[0])


def test_mixing_host_and_device_tensors_fails_like_a_gpu() -> None:
    with emulated_device() as dev:
        x = torch.arange(3, device=dev)
        with pytest.raises(EmulationError, match="same device"):
            _ = x + torch.arange(3)
        assert (x + torch.tensor(1)).tolist() == [1, 2, 3]  # 0-dim host tensors are allowed


def test_region_timer_keeps_raw_samples() -> None:
    with region_timer() as timer:
        for _ in range(3):
            with region("step"), region("inner"):
                pass
    assert [s[0] for s in timer.samples] == ["step/inner", "step"] * 3
    assert all(t1 >= t0 for _, _, _, t0, t1 in timer.samples)
    assert len(timer.host_ns_by_region()["step"]) == 3


def test_fixture_records(sync_ledger: SyncLedger) -> None:
    with emulated_device() as dev:
        torch.arange(3, device=dev).tolist()
    assert sync_ledger.count(SyncKind.D2H_READ) == 1


@pytest.mark.max_syncs(1)
def test_marker_allows_budget() -> None:
    with emulated_device() as dev:
        torch.arange(3, device=dev).tolist()


def test_marker_fails_over_budget(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import syncledger.pytest_plugin as p\n"
        "def pytest_configure(config):\n"
        "    if not config.pluginmanager.has_plugin('syncledger') and "
        "not config.pluginmanager.is_registered(p):\n"
        "        config.pluginmanager.register(p, 'syncledger')\n"
    )
    pytester.makepyfile(
        """
        import pytest, torch
        from syncledger import emulated_device

        @pytest.mark.max_syncs(0)
        def test_over():
            with emulated_device() as dev:
                torch.arange(3, device=dev).sum().item()
        """
    )
    result = run_inner(pytester, "-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 host-device syncs, budget 0*", "*d2h_read item*"])


@pytest.mark.gpu
def test_mixing_emulated_and_real_cuda_tensors_is_an_error() -> None:
    real = torch.arange(3, device="cuda")
    with emulated_device() as dev:
        emu = torch.arange(3, device=dev)
        with pytest.raises(EmulationError, match="real CUDA"):
            _ = emu + real
