"""The CUDA interceptors' logic, on a machine without CUDA: installed once, ledgers only flip
state, and each wrapper classifies by the shared rules (stub tensors stand for CUDA ones)."""

from __future__ import annotations

import warnings

import pytest
import torch

from syncledger import SyncKind, SyncLedger, hooks
from syncledger.classify import CALL
from syncledger.state import STATE
from tests.support.sync_fakes import StubTensor

STAGED = SyncKind.PAGEABLE_STAGED


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """A process with CUDA, whose interceptors and debug mode are recorded, not applied."""
    calls: dict[str, list] = {"install": [], "mode": []}
    monkeypatch.setattr(hooks, "_cuda", True)
    monkeypatch.setattr(hooks, "_installed", False)
    monkeypatch.setattr(hooks, "_open", 0)
    monkeypatch.setattr(hooks, "_forced", False)
    monkeypatch.setattr(hooks, "_install", lambda: calls["install"].append(1))
    monkeypatch.setattr(hooks, "_get_debug_mode", lambda: 0)
    monkeypatch.setattr(hooks, "_set_debug_mode", calls["mode"].append)
    return calls


def test_interceptors_install_once_and_ledgers_only_flip_state(fake_cuda: dict) -> None:
    for _ in range(3):
        with SyncLedger(), SyncLedger():
            assert warnings.showwarning is hooks._showwarning
    assert fake_cuda["install"] == [1]
    assert fake_cuda["mode"] == [1, 0] * 3  # on with the first open ledger, off with the last


def test_sync_warnings_become_events_named_and_classified(fake_cuda: dict) -> None:
    warning = UserWarning("called a synchronizing CUDA operation")
    with SyncLedger() as led:
        warnings.warn(warning, stacklevel=1)
        STATE.op = "setitem"
        CALL.rule, CALL.args = lambda: [SyncKind.H2D_BLOCKING], ()
        try:
            warnings.warn(warning, stacklevel=1)
            warnings.warn(warning, stacklevel=1)  # the rule's kinds are used up: a read
        finally:
            STATE.op = CALL.rule = CALL.kinds = None
    assert [(e.kind, e.op) for e in led.events] == [
        (SyncKind.D2H_READ, "implicit"),
        (SyncKind.H2D_BLOCKING, "setitem"),
        (SyncKind.D2H_READ, "setitem"),
    ]


def _copy_kind(dst: StubTensor, src: StubTensor, non_blocking: bool) -> list[SyncKind]:
    copy_ = hooks._wrap_copy(lambda self, src, nb: self.calls.append(nb))
    with SyncLedger() as led:
        copy_(dst, src, non_blocking)
    assert dst.calls == [non_blocking]  # the real copy ran once
    return [e.kind for e in led.events]


@pytest.mark.parametrize(
    "dst,src,non_blocking,kinds",
    [
        (StubTensor(True), StubTensor(False, pinned=True), True, []),
        (StubTensor(True), StubTensor(False), True, [SyncKind.PAGEABLE_STAGED]),
        (StubTensor(True, 8 << 20), StubTensor(False, 8 << 20), True, [SyncKind.PAGEABLE_ASYNC]),
        (StubTensor(True), StubTensor(False), False, [SyncKind.H2D_BLOCKING]),
        (StubTensor(True), StubTensor(False, pinned=True, contiguous=False), True, [STAGED]),
        (StubTensor(False, pinned=True), StubTensor(True), True, []),
        (
            StubTensor(False, pinned=True, contiguous=False),
            StubTensor(True),
            True,
            [SyncKind.PAGEABLE_ASYNC],
        ),
        (StubTensor(False), StubTensor(True), False, [SyncKind.D2H_READ]),
        (StubTensor(False, 0), StubTensor(True, 0), False, []),
        (StubTensor(True), StubTensor(True), False, []),
    ],
)
def test_copy_interceptor_classifies_by_the_rules(
    dst: StubTensor, src: StubTensor, non_blocking: bool, kinds: list
) -> None:
    assert _copy_kind(dst, src, non_blocking) == kinds


def test_empty_cache_interceptor_records_only_released_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reserved = [4 << 20]
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: reserved[0])
    empty_cache = hooks._wrap_empty_cache(lambda: reserved.__setitem__(0, 2 << 20))
    with SyncLedger() as led:
        empty_cache()  # returns 2 MiB
        empty_cache()  # nothing left to return
    assert [(e.kind, e.nbytes) for e in led.events] == [(SyncKind.ALLOCATOR, 2 << 20)]


def test_interceptors_are_inert_without_a_ledger_and_on_the_emulated_device() -> None:
    dst, src = StubTensor(True), StubTensor(False)
    copy_ = hooks._wrap_copy(lambda self, src, nb: self.calls.append(nb))
    copy_(dst, src, False)  # no ledger open
    with SyncLedger() as led:
        STATE.emulated += 1
        try:
            copy_(dst, src, False)  # the emulated device's own door records this
        finally:
            STATE.emulated -= 1
    assert dst.calls == [False, False] and led.events == []


def test_waits_the_debug_mode_misses_are_counted_per_call() -> None:
    calls: list[dict] = []
    unique = hooks._counted("unique", hooks._unique_dim_waits, lambda *a, **k: calls.append(k))
    with SyncLedger() as led:
        unique(StubTensor(True), dim=0)  # thrust waits three times, unseen by the debug mode
        unique(StubTensor(True))  # no dim: its own warning is counted as usual
        unique(StubTensor(False), dim=0)  # not on a GPU
    assert len(calls) == 3
    assert [(e.kind, e.op) for e in led.events] == [(SyncKind.D2H_READ, "unique")] * 3


class _OnGpu(torch.Tensor):
    """A host tensor that says it is on a GPU: what the indexing interceptors look at."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def _on_gpu(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(_OnGpu)


@pytest.mark.parametrize(
    "op,args,named",
    [
        ("getitem", (3,), False),
        ("getitem", ((slice(1, 3), None, Ellipsis),), False),
        ("getitem", (_on_gpu(torch.tensor([0, 2])),), False),  # gathered on the device
        ("getitem", (_on_gpu(torch.tensor([True, False])),), True),  # a mask: nonzero reads
        ("getitem", (torch.tensor([0, 2]),), True),  # a host index is copied in
        ("getitem", ([0, 2],), True),
        ("setitem", (slice(0, 2), _on_gpu(torch.ones(2))), False),
        ("setitem", (_on_gpu(torch.tensor([0, 2])), _on_gpu(torch.ones(2))), False),
        ("setitem", (0, 5), True),  # a Python number copied in
        ("setitem", (slice(0, 2), torch.ones(2)), True),  # a host tensor copied in
    ],
)
def test_only_indexing_that_may_wait_is_named(op: str, args: tuple, named: bool) -> None:
    seen: list[str | None] = []
    waitless = hooks._getitem_waitless if op == "getitem" else hooks._setitem_waitless
    index = hooks._indexing(op, lambda self, *a: seen.append(STATE.op), lambda *a: [], waitless)
    with SyncLedger():
        index(StubTensor(True), *args)
    assert seen == [op if named else None]
