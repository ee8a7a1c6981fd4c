"""kernels.reference (the PyTorch composite) against an independent per-token Python loop,
plus the interface: registry, dataclasses, sync-freedom, the emulated device."""

from __future__ import annotations

import sys

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kernels
from kernels import reference as ref
from kernels.testing import CaseSpec, as_lists, loop_reference, random_inputs

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# lengths at and around multiples of 4, 128 and 256, and below the SWA window
EDGE_LENS = [1, 2, 3, 4, 5, 127, 128, 129, 255, 256, 257, 383, 384, 511, 512, 513]


def _check(spec: CaseSpec) -> None:
    inp = random_inputs(spec)
    inp.validate()
    assert as_lists(ref.upgrade(inp)) == loop_reference(inp)


@SETTINGS
@given(
    bs=st.integers(1, 6),
    ctx=st.integers(1, 700),
    d=st.sampled_from([0, 1, 4]),
    ragged=st.booleans(),
    paged=st.booleans(),
    topk=st.sampled_from([512, 1024]),
    threshold=st.sampled_from([0, 8, 64]),
    seed=st.integers(0, 2**16),
)
@example(bs=1, ctx=1, d=0, ragged=False, paged=True, topk=512, threshold=0, seed=0)
@example(bs=3, ctx=600, d=4, ragged=True, paged=False, topk=1024, threshold=8, seed=1)
def test_reference_equals_python_loop(bs, ctx, d, ragged, paged, topk, threshold, seed):
    _check(CaseSpec(bs, ctx, d, topk, ragged, paged, threshold=threshold, seed=seed))


@pytest.mark.parametrize("d", [0, 4])
def test_reference_edge_lengths(d):
    lens = [max(x - d, 1) if d else x for x in EDGE_LENS]
    _check(CaseSpec(len(lens), 520, d, lens=lens, threshold=31))


def test_expand_lengths_semantics():
    base = torch.tensor([5, 10, 3])
    req, lens = ref.expand_lengths(base, torch.tensor([2, 0, 3], dtype=torch.int32), 7)
    assert req.tolist() == [0, 0, 2, 2, 2, 2, 2]
    assert lens.tolist() == [6, 7, 4, 5, 6, 1, 1]  # two padding tokens: request bs-1, length 1
    req, lens = ref.expand_lengths(base, 2, 6)
    assert req.tolist() == [0, 0, 1, 1, 2, 2] and lens.tolist() == [6, 7, 11, 12, 4, 5]
    assert req.dtype == torch.int64 and lens.dtype == torch.int32


def test_topk_schedule_semantics():
    raw = torch.tensor([5, 100, 0, 64, 65, 7], dtype=torch.int32)
    assert ref.topk_schedule(raw, 64).tolist() == [
        [64, 2],
        [1, 100],
        [4, 65],
        [-1, 0],
        [-1, 0],
        [-1, 0],
        [-1, 0],
    ]
    assert ref.topk_schedule(raw[:0], 64).tolist() == [[64, 0]]


def test_registry_and_dataclasses():
    assert "torch" in kernels.available_ops()
    assert kernels.get_ops("torch") is kernels.get_ops("torch")
    with pytest.raises(KeyError):
        kernels.get_ops("nope")
    inp = random_inputs(CaseSpec(4, 300, 4))
    full = kernels.get_ops("torch").upgrade(inp)
    n, pages = inp.n_tokens, inp.num_pages
    assert n == 16 and pages == kernels.num_pages_for(308)
    shapes = {k: tuple(v.shape) for k, v in full.as_dict().items()}
    assert shapes["page_table"] == (n, pages)
    assert shapes["c128_page_indices"] == (n, kernels.pad64(2 * pages))
    assert shapes["swa_page_indices"] == (n, 128)
    assert shapes["c4_sparse_page_indices"] == (n, 512)
    assert shapes["indexer_topk_schedule"] == (n + 1, 2)
    assert full.c4_out_loc.dtype == torch.int64 and full.page_table.dtype == torch.int32
    other = kernels.get_ops("torch").upgrade(inp)
    other.page_table.zero_()
    other.copy_(full)
    assert torch.equal(other.page_table, full.page_table)
    with pytest.raises(ValueError):
        kernels.UpgradeInputs(**{**inp.__dict__, "num_tokens": 3}).validate()


@pytest.mark.parametrize(
    "spec", [CaseSpec(4, 600, 4), CaseSpec(5, 700, 0), CaseSpec(5, 700, 4, ragged=True)]
)
def test_reference_on_emulated_device_makes_no_syncs(spec):
    """The sync ledger is the one judge of what syncs (no list of syncing ops here)."""
    sync = pytest.importorskip("syncledger")
    cpu = random_inputs(spec)
    expect = ref.upgrade(cpu)
    with sync.emulated_device() as dev:
        inp = random_inputs(spec, device=dev)
        with sync.SyncLedger() as led:
            full = kernels.get_ops("triton").upgrade(inp)  # falls back to the reference
            full_t = kernels.get_ops("torch").upgrade(inp)
        assert led.events == []
        got = {k: v.cpu() for k, v in full.as_dict().items()}
        got_t = {k: v.cpu() for k, v in full_t.as_dict().items()}
    for k, v in expect.as_dict().items():
        assert torch.equal(got[k], v) and torch.equal(got_t[k], v), k


def test_triton_path_choice(monkeypatch):
    """cuda -> Triton; cpu -> Triton only with the interpreter; meta (emulated) -> reference;
    kernels already built for the other kind -> reference, with one warning."""
    import types

    from kernels import triton_ops

    cpu = torch.zeros(1)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not triton_ops.triton_path_for(cpu)
    assert not triton_ops.triton_path_for(torch.zeros(1, device="meta"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    fake = types.SimpleNamespace(INTERPRETED=False)
    monkeypatch.setitem(sys.modules, "kernels.triton_launch", fake)
    monkeypatch.setattr(triton_ops, "_warned", [])
    with pytest.warns(UserWarning, match="built for the GPU"):
        assert not triton_ops.triton_path_for(cpu)
    fake.INTERPRETED = True
    assert triton_ops.triton_path_for(cpu)
