"""The op table's derivation (synthetic observations here: the GPU check makes real ones with
CUPTI) and the emulated device held to the calls a GPU recorded for it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from harness.checks.op_table import derive
from harness.checks.op_table_emu import replay
from syncledger.emulated import waits

REPO = Path(__file__).resolve().parents[2]
D = "d2h_read"


def _tagged(op: str) -> bool:
    return op in {"aten::nonzero", "aten::unique"}


def test_derive_tables_what_the_tags_do_not_say() -> None:
    calls = {
        ("aten::nonzero", "d"): Counter({(D,): 4}),  # the tags say one read: no entry
        ("aten::add", "dd"): Counter({(): 9}),  # never waits: no entry
        ("aten::bincount", "d"): Counter({(D, D): 2}),
        ("aten::_ctc_loss", "dddd"): Counter({(D, D, "h2d_blocking"): 1}),
        ("aten::unique", "d"): Counter({(D,): 3}),  # CUDA returns early on empty input
        ("aten::unique", "e"): Counter({(): 2}),
        ("aten::index", "dh"): Counter({("h2d_blocking",): 1}),  # ruled: not tabled
        ("aten::_linalg_svd", "d"): Counter({(D, D): 2, (D,): 1}),
    }
    entries, varied = derive(calls, _tagged, frozenset({"aten::index"}))
    assert entries == {
        "aten::bincount": 2,
        "aten::_ctc_loss": [D, D, "h2d_blocking"],
        "aten::unique": {"by_args": {"e": 0}, "else": 1},
        "aten::_linalg_svd": 2,
    }
    assert varied == ["aten::_linalg_svd"]


def test_an_entry_by_call_class_decides_per_call() -> None:
    from syncledger import SyncLedger, emulated_device

    rule = waits._table_rule({"by_args": {"e": 0, "hd": ["h2d_blocking"]}, "else": 1})
    with emulated_device():
        full, empty = torch.ones(3, device="cuda"), torch.ones(0, device="cuda")
        assert (
            waits.call_class(
                (full, empty, torch.tensor(2.0, device="cuda")), {}, waits._is_emulated
            )
            == "des"
        )
        assert rule((empty,), {}) == []
        assert rule((full,), {}) == [waits.D2H]
        assert rule((torch.ones(2), full), {}) == [waits.SyncKind.H2D_BLOCKING]
        with SyncLedger() as led:
            torch.unique(full)
        assert led.count() == 1  # the tag rule, no entry


def test_replay_names_each_call_whose_waits_differ() -> None:
    def call(op: str, gpu_waits: tuple[str, ...]) -> dict:
        values = torch.tensor([1, 3, 3])
        return {
            "op": op,
            "class": "d",
            "args": ((("tensor", values, True, False),), {}),
            "waits": gpu_waits,
        }

    calls = [
        call("aten::bincount", (D, D)),
        call("aten::cumsum", ()),
        call("aten::nonzero", (D, D, D)),
    ]
    calls[1]["args"] = ((("tensor", torch.tensor([1, 3, 3]), True, False), 0), {})
    assert replay(calls) == [
        "aten::nonzero [d]: GPU ('d2h_read', 'd2h_read', 'd2h_read'), emulated ('d2h_read',)"
    ]


def _evidence() -> Path | None:
    derived = json.loads(waits.OP_TABLE.read_text()).get("derived")
    return None if derived is None else REPO / derived["evidence"] / "op_calls.pt"


@pytest.mark.skipif(_evidence() is None, reason="the table predates the OpInfo derivation")
def test_the_emulated_device_waits_as_the_gpu_did_on_the_calls_it_kept() -> None:
    calls = torch.load(_evidence(), weights_only=False)
    assert calls
    assert replay(calls) == []
