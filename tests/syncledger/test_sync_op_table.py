"""The emulated device's table of ops whose CUDA kernels wait: what it holds drives the device
(its derivation is tested in tests/checks/test_op_table.py)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from syncledger import SyncKind, SyncLedger, emulated_device
from syncledger.emulated import waits


def test_the_table_drives_the_emulated_device() -> None:
    # what the GPU measured for the catalogue's calls (cases unique_dim, bincount, the normal)
    with emulated_device():
        eye, counts = torch.eye(3, device="cuda"), torch.tensor([1, 3, 3], device="cuda")
        with SyncLedger() as led:
            torch.unique(eye, dim=0)
            torch.bincount(counts)
            torch.normal(eye, eye.abs() + 1)
        assert [e.op for e in led.events] == ["unique"] * 3 + ["bincount"] * 2 + ["normal"] * 2


def test_the_table_names_overloads_and_skips_ops_not_loaded_here() -> None:
    aten = torch.ops.aten
    # recorded per overload: only the overload it names gets the rule
    assert "aten::normal.Tensor_Tensor" in waits.load_op_table()
    assert waits.rule_for(aten.normal.float_float) is None
    assert waits.overload_named("aten::bincount") is aten.bincount.default
    assert waits.overload_named("nosuchlib::op") is None


@pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is not None,
    reason="torchvision's own NMS is here: the real-programs suite counts it",
)
def test_an_op_whose_library_loads_after_the_ledger_gets_its_rule() -> None:
    # torchvision is imported by the program, after the ledger: stand in for it with its NMS's
    # schema and a CPU kernel. Its CUDA kernel copies the mask to the host once a call.
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.impl("nms", lambda dets, scores, iou: scores.argsort(descending=True), "CPU")
    with emulated_device() as dev:
        boxes = torch.rand(4, 4, device=dev)
        scores = torch.rand(4, device=dev)
        with SyncLedger() as led:
            keep = torch.ops.torchvision.nms(boxes, scores, 0.5)
        assert keep.shape == (4,)
    assert [(e.kind, e.op) for e in led.events] == [(SyncKind.D2H_READ, "nms")]
