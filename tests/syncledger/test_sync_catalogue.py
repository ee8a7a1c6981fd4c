"""Every planted sync is caught, classified and attributed to the line that made it."""

from __future__ import annotations

import inspect
from collections import Counter

import pytest
import torch

from syncledger import SyncKind, SyncLedger, emulated_device, region
from syncledger.catalogue import CASES, Case, make_inputs

THIS_FILE = "tests/syncledger/test_sync_catalogue.py"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_kind_count_and_line(case: Case) -> None:
    with emulated_device() as dev:
        inputs = make_inputs(dev)
        if case.setup is not None:
            case.setup(inputs, dev)
        with SyncLedger() as led, region("planted"):
            line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            case.body(inputs, dev)
    assert Counter(e.kind for e in led.events) == Counter(case.expected)
    assert led.count() == case.syncs
    for event in led.events:
        assert event.location.endswith(f"{THIS_FILE}:{line}"), event.describe()
        assert event.function == "test_case_kind_count_and_line"
        assert event.region == "planted"
        assert event.stack[0][1] == line


def test_catalogue_covers_what_the_ledger_must_catch() -> None:
    names = {c.name for c in CASES}
    assert {
        "getitem_host_index", "setitem_host_index_device_scalar",
        "setitem_bool_mask_device_scalar", "setitem_bool_mask_python_scalar",
        "d2h_nonblocking_into_strided_pinned", "h2d_nonblocking_strided_pinned",
        "zero_bytes_h2d_nonblocking", "zero_bytes_d2h",
        "h2d_nonblocking_pageable_4KiB", "h2d_nonblocking_pageable_64KiB",
        "h2d_nonblocking_pageable_1MiB", "h2d_nonblocking_pageable_4MiB",
        "h2d_nonblocking_pageable_16MiB", "h2d_nonblocking_pageable_64MiB",
        "empty_cache_with_cached_blocks", "empty_cache_nothing_cached", "allclose",
        "histc_no_range", "histc_range", "one_hot_no_num_classes", "one_hot_num_classes",
        "print", "fstring_scalar", "multinomial_one", "bincount", "unique", "masked_select",
        "nanmedian", "linalg_inv", "linalg_cholesky", "repeat_interleave_tensor",
    } <= names  # fmt: skip
    assert len(CASES) >= 90
    # every kind a real call makes (unclassified is the ledger's own failure, tested apart)
    assert {k for c in CASES for k in c.expected} == set(SyncKind) - {SyncKind.UNCLASSIFIED}


def test_values_are_real_on_the_emulated_device() -> None:
    with emulated_device() as dev:
        x = torch.arange(6, device=dev).view(2, 3)
        y = (x * 2 + 1)[:, 1:].contiguous()
        assert y.tolist() == [[3, 5], [9, 11]]
        assert (x.device, x.is_cuda) == (torch.device("cuda", 0), True)  # what Python sees
        assert torch._C.TensorBase.device.__get__(x).type == "meta"  # no CUDA runtime needed
        view = x[1]
        view.add_(10)  # in place through a view reaches the base, as on a GPU
        assert x.sum().item() == 15 + 30
        assert torch.where(x > 11, x, -1).tolist() == [[-1, -1, -1], [13, 14, 15]]
