"""Every planted sync is caught, classified and attributed to the line that made it."""

from __future__ import annotations

import inspect
from collections import Counter

import pytest
import torch

from harness.sync import SyncLedger, emulated_device, region
from harness.sync.catalogue import PATTERNS, Pattern, make_inputs

THIS_FILE = "tests/test_sync_catalogue.py"


@pytest.mark.parametrize("pattern", PATTERNS, ids=[p.name for p in PATTERNS])
def test_pattern_kind_count_and_line(pattern: Pattern) -> None:
    with emulated_device() as dev:
        inputs = make_inputs(dev)
        with SyncLedger() as led, region("planted"):
            line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            pattern.body(inputs, dev)
    assert Counter(e.kind for e in led.events) == Counter(pattern.expected)
    for event in led.events:
        assert event.location.endswith(f"{THIS_FILE}:{line}"), event.describe()
        assert event.function == "test_pattern_kind_count_and_line"
        assert event.region == "planted"
        assert event.stack[0][1] == line


def test_catalogue_covers_every_kind_the_issue_lists() -> None:
    names = {p.name for p in PATTERNS}
    assert {
        "item", "tolist", "cpu", "int", "bool", "nonzero", "bool_mask_index",
        "repeat_interleave_tensor", "repeat_interleave_output_size", "tensor_from_list",
        "h2d_blocking_pageable", "h2d_blocking_pinned", "h2d_nonblocking_pageable",
        "h2d_nonblocking_pinned", "d2h_nonblocking_to", "device_synchronize",
        "stream_synchronize", "event_synchronize", "cumsum", "max_unread",
    } <= names  # fmt: skip
    kinds = {k for p in PATTERNS for k in p.expected}
    assert {k.value for k in kinds} == {"d2h_read", "h2d_blocking", "pageable_async", "explicit"}


def test_values_are_real_on_the_emulated_device() -> None:
    with emulated_device() as dev:
        x = torch.arange(6, device=dev).view(2, 3)
        y = (x * 2 + 1)[:, 1:].contiguous()
        assert y.tolist() == [[3, 5], [9, 11]]
        assert x.device.type == "meta"
        view = x[1]
        view.add_(10)  # in place through a view reaches the base, as on a GPU
        assert x.sum().item() == 15 + 30
        assert torch.where(x > 11, x, -1).tolist() == [[-1, -1, -1], [13, 14, 15]]
