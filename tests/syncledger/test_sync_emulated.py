"""The emulated device's one door: host reads outside aten, generic discovery by op tags, the
allocator cache model, the stream API stand-ins, and hazards in the ledger."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from syncledger import (
    EmulationError,
    SyncBudgetExceeded,
    SyncKind,
    SyncLedger,
    emulated_device,
    host_values,
    max_syncs,
)
from syncledger.emulated import cache

D2H = SyncKind.D2H_READ


def _events(led: SyncLedger) -> list[tuple[str, str]]:
    return [(e.kind.value, e.op) for e in led.events]


def test_printing_reads_each_element_then_the_whole() -> None:
    with emulated_device() as dev:
        x = torch.tensor([1, 2, 3], dtype=torch.int32, device=dev)
        with SyncLedger() as led:
            text = repr(x)
            scalar = f"{x[1]}"
    assert text == "tensor([1, 2, 3], device='emulated', dtype=torch.int32)"
    assert scalar == "2"
    assert _events(led) == [("d2h_read", "repr")] * 4 + [("d2h_read", "format")]


def test_numpy_needs_a_copy_to_the_host_first() -> None:
    with emulated_device() as dev:
        x = torch.arange(3, device=dev)
        with pytest.raises(TypeError, match="copy it to the host"):
            x.numpy()
        with pytest.raises(TypeError, match="copy it to the host"):
            np.asarray(x)
        assert x.cpu().numpy().tolist() == [0, 1, 2]


def test_one_hot_works_and_reads_only_without_num_classes() -> None:
    labels = torch.tensor([0, 3, 1])
    with emulated_device() as dev:
        d = labels.to(dev)
        with SyncLedger() as led:
            wide = F.one_hot(d)
            fixed = F.one_hot(d, num_classes=6)
        assert torch.equal(host_values(wide), F.one_hot(labels))
        assert torch.equal(host_values(fixed), F.one_hot(labels, 6))
    assert _events(led) == [("d2h_read", "one_hot")]


def test_ops_tagged_data_dependent_are_found_without_a_list() -> None:
    lib = torch.library.Library("harness_sync_test", "DEF")
    lib.define("shape_from_data(Tensor x) -> Tensor", tags=(torch.Tag.dynamic_output_shape,))
    lib.impl("shape_from_data", lambda x: x[x > 0], "CPU")
    with emulated_device() as dev:
        x = torch.tensor([0, 5, 0, 7], device=dev)
        with SyncLedger() as led:
            out = torch.ops.harness_sync_test.shape_from_data(x)
        assert out.tolist() == [5, 7]
    assert _events(led) == [("d2h_read", "shape_from_data")]


def test_empty_cache_is_a_sync_only_with_freed_blocks() -> None:
    with emulated_device() as dev:
        torch.cuda.empty_cache()  # start from an empty cache
        kept = torch.ones(256, device=dev)
        with SyncLedger() as led:
            torch.cuda.empty_cache()  # a live tensor is not cached
            freed = torch.ones(1024, device=dev)
            del freed
            torch.cuda.empty_cache()
            torch.cuda.empty_cache()
        assert kept.sum().item() == 256
    assert [(e.kind, e.nbytes) for e in led.events] == [(SyncKind.ALLOCATOR, 4096)]


def test_stream_api_stand_ins() -> None:
    with emulated_device():
        side = torch.cuda.Stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with SyncLedger() as led:
            start.record()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                assert torch.cuda.current_stream() is side
                side.record_event(end)
            torch.cuda.current_stream().wait_event(end)
            assert side.query() and end.query()
            assert end.elapsed_time(start) <= 0.0 <= start.elapsed_time(end)
            side.synchronize()
        assert torch.cuda.current_stream() is torch.cuda.default_stream()
    assert _events(led) == [("explicit", "Stream.synchronize")]


def test_host_index_tensors_are_moved_and_lists_keep_their_values() -> None:
    with emulated_device() as dev:
        x = torch.arange(10, 18, device=dev)
        with SyncLedger() as led:
            got = x[[0, 2]]
            x[torch.tensor([1])] = 5
        assert got.tolist() == [10, 12] and x[1].item() == 5
    assert [e.kind for e in led.events] == [SyncKind.H2D_BLOCKING] * 3  # index; index, value


def test_a_plain_meta_tensor_is_refused() -> None:
    plain = torch.empty(3, device="meta")  # made outside the emulated device: no values
    with emulated_device() as dev:
        x = torch.arange(3, device=dev)
        with pytest.raises(EmulationError, match="plain meta tensor"):
            _ = x + plain


def test_hazards_are_listed_but_not_counted() -> None:
    with emulated_device() as dev:
        dst = torch.empty(1024, dtype=torch.uint8, device=dev)
        src = torch.ones(1024, dtype=torch.uint8)
        with max_syncs(0) as led:
            dst.copy_(src, non_blocking=True)  # staged by the driver: no wait
        assert led.count() == 0 and led.count("pageable_staged") == 1
        assert (
            "0 syncs at 0 locations (and 1 non-blocking hazards, not counted)" in led.format_table()
        )
        assert '"hazards": 1' in led.to_json() and '"total": 0' in led.to_json()
        with (
            pytest.raises(SyncBudgetExceeded, match="pageable_staged"),
            max_syncs(0, "pageable_staged"),
        ):
            dst.copy_(src, non_blocking=True)


def test_an_address_freed_and_reused_is_a_new_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host allocator may hand a freed storage's address to the next storage: that one is a
    new allocation, and each free returns its own bytes to the cache."""
    with emulated_device() as dev:
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated()
        monkeypatch.setattr(cache, "_storage_address", lambda t: 1)  # every storage at one address
        first = torch.ones(1024, device=dev)
        assert torch.cuda.memory_allocated() == before + 4096
        del first
        second = torch.ones(256, device=dev)
        assert torch.cuda.memory_allocated() == before + 1024
        del second
        with SyncLedger() as led:
            torch.cuda.empty_cache()
    assert [(e.kind, e.nbytes) for e in led.events] == [(SyncKind.ALLOCATOR, 5 * 1024)]


def test_freeing_a_device_tensor_runs_no_python_code() -> None:
    """CPython runs a pending Ctrl-C's handler at the next Python bytecode and drops an
    exception raised inside a weakref callback: Python code run at a tensor's free would swallow
    a Ctrl-C that lands there. The free is still counted, at the next allocator query."""
    calls: list[str] = []

    def profile(frame, event: str, arg) -> None:
        if event == "call":
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    with emulated_device() as dev:
        freed = torch.ones(1024, device=dev)
        before = torch.cuda.memory_allocated()
        sys.setprofile(profile)
        try:
            del freed
        finally:
            sys.setprofile(None)
        assert torch.cuda.memory_allocated() == before - 4096
    assert calls == []


def test_an_op_calls_no_audited_builtin() -> None:
    """Every audited event (`id()` raises one) calls each audit hook of the process in Python,
    the ledger's own among them: an op's way through the door makes none."""
    called: set[str] = set()

    def profile(frame, event: str, arg) -> None:
        if event == "c_call" and arg in (id, sys._getframe):
            called.add(f"{arg.__name__} from {frame.f_code.co_filename}:{frame.f_lineno}")

    def ops(x: torch.Tensor) -> torch.Tensor:  # arithmetic, a view, a cast, an index, a free
        return (x + 1)[:, None].to(torch.int32).sum(0) + x[x.clamp(max=5)].cumsum(0)[0]

    with emulated_device() as dev, SyncLedger():
        x = torch.arange(64, device=dev)
        ops(x)  # the first calls make the ops' plans
        sys.setprofile(profile)
        try:
            ops(x)
        finally:
            sys.setprofile(None)
    assert called == set()


def test_a_view_is_no_allocation_of_its_own() -> None:
    """Views made inside the wrapper's dispatch have no `_base`; they share their base's
    storage, and freeing one returns nothing to the driver while the base lives."""
    with emulated_device() as dev:
        base = torch.ones(1024, device=dev)
        before = torch.cuda.memory_allocated()
        view = base[1:]
        assert torch.cuda.memory_allocated() == before
        torch.cuda.empty_cache()
        with SyncLedger() as led:
            del view
            torch.cuda.empty_cache()  # the base holds the storage: nothing is cached
            del base
            torch.cuda.empty_cache()
    assert [(e.kind, e.nbytes) for e in led.events] == [(SyncKind.ALLOCATOR, 4096)]


def test_autograds_zero_gradient_holds_real_zeros() -> None:
    """`sgn`'s backward makes an `_efficientzerotensor`, which holds no memory: on the emulated
    device it is real zeros, which later ops can read."""
    with emulated_device() as dev:
        x = torch.tensor([-1.5, 0.0, 2.0], device=dev, requires_grad=True)
        torch.sgn(x).sum().backward()
        assert (x.grad + 1).tolist() == [1.0, 1.0, 1.0]
