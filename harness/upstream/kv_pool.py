"""Upstream's DeepSeek-V4 KV pool around the model's pool.

Upstream's own class, its methods unchanged, built without its constructor (which sizes and
allocates the whole server's KV memory): it holds the model pool's full-to-SWA mapping, the
page sizes and flags the metadata paths read, one layer per compress ratio, and KV caches of
upstream's byte layout, zero-filled, made when the sparse prefill asks for one (on CUDA its
dequantization kernel reads them).
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from harness.batch.pool import ReqToTokenPool
from harness.upstream.handed import Handed, handed_instance

SWA_PAGE = 128
# a token's bytes in upstream's paged KV cache: 448 fp8 nope, 64 bf16 rope, one scale per 64
# nope values and a pad byte; a page padded to a multiple of 576 bytes
# (DeepSeekV4SingleKVPool.get_bytes_per_token / create_buffer)
BYTES_PER_TOKEN = 448 + 64 * 2 + 448 // 64 + 1
PAGE_ALIGN = 576
# the layer id of a forward's first layer at each compress ratio (0: SWA only)
LAYER_OF_RATIO = {0: 0, 4: 1, 128: 2}


def _paged_cache(pages: int, page_size: int, device: torch.device) -> torch.Tensor:
    per_page = -(-page_size * BYTES_PER_TOKEN // PAGE_ALIGN) * PAGE_ALIGN
    return torch.zeros(pages, per_page, dtype=torch.uint8, device=device)


def _cache_pool(
    what: str, pages: int, page_size: int, device: torch.device, **layout: Any
) -> Handed:
    return Handed(
        what,
        page_size=page_size,
        get_key_buffer=lambda layer: _paged_cache(pages, page_size, device),
        **layout,
    )


def kv_pool(cls: type, pool: ReqToTokenPool, device: torch.device) -> Any:
    """Upstream's pool class `cls` around the model's `pool`. Upstream's mapping has one slot
    more than the pool, holding -1: a masked slot index of -1 maps to it."""
    sentinel = torch.full((1,), -1, dtype=pool.full_to_swa.dtype, device=device)
    pages = pool.cfg.kv_page_count
    # the caches' byte layout, named from 0.5.21 on (V4.1 adds others): V4's
    kv_layout = getattr(sys.modules[cls.__module__], "KVLayout", None)
    layout = {} if kv_layout is None else {"kv_layout": kv_layout.V4}
    # a compressed pool's page holds a KV page's tokens, one per `ratio`
    compressed = {
        r: _cache_pool(f"c{r}_kv_pool", pages, pool.page_size // r, device, **layout)
        for r in (4, 128)
    }
    indexer = Handed("indexer_pool", page_size=pool.page_size // 4)  # C4's indexer keys
    layers = [None] * len(LAYER_OF_RATIO)
    for ratio, layer in LAYER_OF_RATIO.items():
        layers[layer] = (ratio, 0 if ratio else None, compressed.get(ratio))
    return handed_instance(
        cls,
        "token_to_kv_pool",
        full_to_swa_index_mapping=torch.cat([pool.full_to_swa, sentinel]),
        swa_page_size=SWA_PAGE,
        swa_window_size=SWA_PAGE,
        page_size=pool.page_size,
        layer_mapping=layers,
        swa_kv_pool=_cache_pool("swa_kv_pool", pool.cfg.swa_page_count, SWA_PAGE, device),
        start_layer=0,
        _stage_start=0,
        layer_transfer_counter=None,
        c4_indexer_kv_pool=indexer,  # up to 0.5.19
        index_pools={4: indexer},  # 0.5.20 on
        present_ratios=(4, 128),  # 0.5.21 on: the compressed pools of V4 Flash's layers
        request_window=None,  # 0.5.21 on: set only under encoder replay (off by default)
        _unified_kv=False,  # 0.5.20 on: the request-addressed C4 state is ROCm's only
        **layout,
    )
