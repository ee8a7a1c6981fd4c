"""The classification rules shared by the CUDA interceptors and the emulated device, checked
without a GPU: a wrong rule fails here, though the CUDA interceptors never run in CI."""

from __future__ import annotations

import pytest
import torch

from syncledger import SyncKind, pageable_staging_bytes, set_pageable_staging_bytes
from syncledger.rules import (
    H200_STAGING_BYTES,
    HostMemory,
    IndexArg,
    ValueArg,
    basic_setitem_kinds,
    classify_d2h,
    classify_empty_cache,
    classify_h2d,
    copy_host_memory,
    getitem_kinds,
    index_kinds,
    index_put_kinds,
    masked_fill_kinds,
    setitem_kinds,
)

D2H, H2D = SyncKind.D2H_READ, SyncKind.H2D_BLOCKING
ASYNC, STAGED = SyncKind.PAGEABLE_ASYNC, SyncKind.PAGEABLE_STAGED
PINNED, PAGEABLE = HostMemory(pinned=True), HostMemory(pinned=False)
STRIDED_PINNED = HostMemory(pinned=True, contiguous=False)
MIB = 1 << 20


def test_only_the_staged_hazard_is_not_a_sync() -> None:
    assert [k for k in SyncKind if not k.is_sync] == [STAGED]


@pytest.mark.parametrize(
    "nbytes,non_blocking,src,kind",
    [
        (8, False, PAGEABLE, H2D),
        (8, False, PINNED, H2D),
        (8, True, PINNED, None),
        (64 * MIB, True, PINNED, None),
        (4096, True, PAGEABLE, STAGED),
        (2 * MIB, True, PAGEABLE, STAGED),  # the H200's staging size returns at once
        (2 * MIB + 4096, True, PAGEABLE, ASYNC),
        (64 * MIB, True, PAGEABLE, ASYNC),
        (64, True, STRIDED_PINNED, STAGED),  # staged through a pageable temporary
        (0, False, PAGEABLE, None),  # nothing to copy
        (0, True, PAGEABLE, None),
    ],
)
def test_host_to_device(nbytes: int, non_blocking: bool, src: HostMemory, kind: object) -> None:
    assert classify_h2d(nbytes, non_blocking, src) is kind


@pytest.mark.parametrize(
    "nbytes,non_blocking,dst,kind",
    [
        (8, False, PINNED, D2H),
        (8, False, PAGEABLE, D2H),
        (8, True, PINNED, None),
        (8, True, PAGEABLE, ASYNC),
        (8, True, STRIDED_PINNED, ASYNC),
        (0, False, PAGEABLE, None),
    ],
)
def test_device_to_host(nbytes: int, non_blocking: bool, dst: HostMemory, kind: object) -> None:
    assert classify_d2h(nbytes, non_blocking, dst) is kind


def test_staging_size_is_configurable() -> None:
    assert pageable_staging_bytes() == H200_STAGING_BYTES == 2 * MIB
    try:
        set_pageable_staging_bytes(MIB)
        assert classify_h2d(2 * MIB, True, PAGEABLE) is ASYNC
    finally:
        set_pageable_staging_bytes(H200_STAGING_BYTES)
    with pytest.raises(ValueError, match="non-negative int"):
        set_pageable_staging_bytes(-1)


def test_copy_host_memory_is_direct_only_when_contiguous_and_same_shape() -> None:
    host, dev = torch.empty(8), torch.empty(8)
    assert copy_host_memory(host, dev, pinned=True).direct
    assert not copy_host_memory(host, dev, pinned=False).direct
    assert not copy_host_memory(torch.empty(8, 2)[:, 0], dev, pinned=True).direct
    assert not copy_host_memory(torch.empty(1), dev, pinned=True).direct  # broadcast


def test_empty_cache_waits_only_when_it_returns_blocks() -> None:
    assert classify_empty_cache(1 << 20) is SyncKind.ALLOCATOR
    assert classify_empty_cache(0) is None


DEV_MASK, HOST_MASK = IndexArg(True, True), IndexArg(False, True)
DEV_IDX, HOST_IDX = IndexArg(True, False), IndexArg(False, False)
DEV_SCALAR, HOST_SCALAR = ValueArg(True), ValueArg(False)


@pytest.mark.parametrize(
    "indices,kinds",
    [
        ([DEV_IDX], []),
        ([DEV_MASK], [D2H]),
        ([HOST_IDX], [H2D]),
        ([HOST_MASK], []),  # indices made on the host, in pinned memory, copied without a wait
        ([None, DEV_MASK, HOST_IDX], [D2H, H2D]),
    ],
)
def test_index(indices: list, kinds: list) -> None:
    assert index_kinds(indices) == kinds


@pytest.mark.parametrize(
    "indices,value,accumulate,kinds",
    [
        ([DEV_MASK], HOST_SCALAR, False, []),  # masked_fill with a host number
        ([DEV_MASK], HOST_SCALAR, True, [H2D, D2H]),
        ([DEV_MASK], DEV_SCALAR, False, [D2H]),
        ([DEV_MASK], ValueArg(True, 5, 1), False, [D2H]),
        ([HOST_MASK], DEV_SCALAR, False, []),
        ([HOST_MASK], HOST_SCALAR, False, [H2D]),
        ([DEV_IDX], HOST_SCALAR, False, [H2D]),
        ([DEV_IDX], DEV_SCALAR, False, []),
        ([HOST_IDX], DEV_SCALAR, False, [H2D]),
        ([HOST_IDX], HOST_SCALAR, False, [H2D, H2D]),
    ],
)
def test_index_put(indices: list, value: ValueArg, accumulate: bool, kinds: list) -> None:
    assert index_put_kinds(indices, value, accumulate) == kinds


def test_masked_fill_reads_a_device_scalar() -> None:
    assert masked_fill_kinds(DEV_SCALAR) == [D2H]
    assert masked_fill_kinds(HOST_SCALAR) == []


def test_basic_setitem() -> None:
    assert basic_setitem_kinds(0, HOST_SCALAR) == [H2D]  # t[0] = 5: a copy into one element
    assert basic_setitem_kinds(1, HOST_SCALAR) == []  # t[1:3] = 5: a fill
    assert basic_setitem_kinds(1, DEV_SCALAR) == []
    assert basic_setitem_kinds(1, ValueArg(False, 2, 1)) == [H2D]


def test_python_indexing_maps_onto_the_rules() -> None:
    mask, idx = torch.ones(4, dtype=torch.bool), torch.tensor([0, 2])
    assert getitem_kinds(idx, 1) == [H2D]  # host tensors here: this machine's CPU
    assert getitem_kinds(mask, 1) == []
    assert getitem_kinds((slice(None), [0, 2]), 2) == [H2D]
    assert getitem_kinds([0, 2], 1) == [H2D]
    assert getitem_kinds((0, slice(1, 3)), 2) == []
    assert setitem_kinds(0, 1, 5) == [H2D]
    assert setitem_kinds((0, 1), 2, 5) == [H2D]
    assert setitem_kinds((0, None), 1, 5) == []  # a view of one dimension: a fill
    assert setitem_kinds(slice(0, 2), 1, 5) == []
    assert setitem_kinds(idx, 1, 5) == [H2D, H2D]
    assert setitem_kinds(mask, 1, 5) == [H2D]
