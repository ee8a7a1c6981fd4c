"""The interface the backend calls: input/output dataclasses, the ops protocol, the registry.

Semantics follow sglang's DeepSeek-V4 backend (`make_core_attn_metadata` and the
compression-metadata Triton kernel); `FullMetadataTensors` defines every field. Conventions:

* N = query tokens this step; bs = requests. Every per-token tensor has leading dim N.
* Lengths and positions are int32; request/pool indices and full-space cache slots int64.
* "pad64(x)" = x rounded up to a multiple of 64 (FlashMLA wants index rows aligned to 64);
  padding columns hold -1.
* Sizes are host ints passed in: no op reads a device value on the host (no syncs), so every
  op is capturable in a CUDA graph.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

KV_PAGE_SIZE = 256
SWA_WINDOW = 128
C128_RATIO = 128
C4_RATIO = 4
PAGE_INDEX_ALIGN = 64
INDEX_TOPK_FLASH = 512
INDEX_TOPK_PRO = 1024
# Out-locations of tokens that do not complete a compression group point at slot 0, the
# pool's reserved dummy slot (upstream's Triton kernel writes 0 there).
NULL_SLOT = 0
# Tokens whose c4 length exceeds this go to the indexer's "cluster" list of the schedule.
TOPK_CLUSTER_THRESHOLD = 4096


def pad64(x: int) -> int:
    """Round up to a multiple of PAGE_INDEX_ALIGN (64)."""
    return (x + PAGE_INDEX_ALIGN - 1) // PAGE_INDEX_ALIGN * PAGE_INDEX_ALIGN


def num_pages_for(max_seq_len: int, page_size: int = KV_PAGE_SIZE) -> int:
    """Page-table width: ceil(max_seq_len / page_size)."""
    return (max_seq_len + page_size - 1) // page_size


def c128_width(num_pages: int, page_size: int = KV_PAGE_SIZE) -> int:
    """Width of c128_page_indices: pad64(num_pages * page_size // 128)."""
    return pad64(num_pages * (page_size // C128_RATIO))


@dataclass
class UpgradeInputs:
    """Raw metadata (built out of graph) that the in-graph upgrade turns into full metadata.

    req_to_token:      int32 [P, W]   full-space KV slot of each (request pool row, position);
                                      W = context length + draft slots (MAX_SEQ_LEN_FOR_CAPTURE).
    req_pool_indices:  int64 [bs]     pool row of each request.
    seq_lens:          int32|int64 [bs] upstream's raw `seq_lens`: for decode
                                      (num_draft_tokens == 0) the length *including* the token
                                      being decoded; for verify the committed length L before
                                      the draft tokens (token k gets L + k + 1).
    out_cache_loc:     int64 [N]      full-space slot each token writes.
    full_to_swa:       int64 [S]      full-space slot -> SWA-space slot.
    num_draft_tokens:  0 for decode (one token per request), D for uniform verify.
    extend_lens:       int32 [bs] or None: ragged verify / draft-extend tokens per request
                                      (token k of request r gets seq_lens[r] + k + 1); then
                                      num_tokens must be given (host int, >= sum of extend_lens;
                                      extra tokens are padding: request bs-1, length 1).
    num_tokens:        N; defaults to bs * max(num_draft_tokens, 1).
    max_seq_len:       page-table span in tokens; defaults to W (upstream uses
                                      MAX_SEQ_LEN_FOR_CAPTURE in graph).
    index_topk:        512 (Flash) or 1024 (Pro): width of c4_sparse_page_indices.
    """

    req_to_token: Tensor
    req_pool_indices: Tensor
    seq_lens: Tensor
    out_cache_loc: Tensor
    full_to_swa: Tensor
    num_draft_tokens: int = 0
    extend_lens: Tensor | None = None
    num_tokens: int | None = None
    max_seq_len: int | None = None
    index_topk: int = INDEX_TOPK_FLASH
    page_size: int = KV_PAGE_SIZE
    swa_window: int = SWA_WINDOW
    topk_cluster_threshold: int = TOPK_CLUSTER_THRESHOLD

    @property
    def batch_size(self) -> int:
        return int(self.seq_lens.shape[0])

    @property
    def tokens_per_req(self) -> int:
        return max(self.num_draft_tokens, 1)

    @property
    def n_tokens(self) -> int:
        """N as a host int (never reads a device value)."""
        if self.num_tokens is not None:
            return self.num_tokens
        if self.extend_lens is not None:
            raise ValueError("UpgradeInputs: num_tokens is required with extend_lens")
        return self.batch_size * self.tokens_per_req

    @property
    def span(self) -> int:
        return self.max_seq_len if self.max_seq_len is not None else self.req_to_token.shape[1]

    @property
    def num_pages(self) -> int:
        return num_pages_for(self.span, self.page_size)

    def base_lens_offset(self) -> int:
        """Added to seq_lens to get the expansion base (token k gets base + k + 1)."""
        return -1 if (self.num_draft_tokens == 0 and self.extend_lens is None) else 0

    def validate(self) -> None:
        """Shape/dtype checks on host metadata only (no device reads)."""
        if self.req_to_token.dim() != 2 or self.req_to_token.dtype != torch.int32:
            raise ValueError("req_to_token must be int32 [P, W]")
        if self.req_pool_indices.shape != self.seq_lens.shape:
            raise ValueError("req_pool_indices and seq_lens must both be [bs]")
        if self.out_cache_loc.shape != (self.n_tokens,):
            raise ValueError(f"out_cache_loc must be [{self.n_tokens}]")
        if self.index_topk % PAGE_INDEX_ALIGN or self.page_size % C128_RATIO:
            raise ValueError("index_topk must be a multiple of 64; page_size of 128")
        if self.span > self.req_to_token.shape[1]:
            raise ValueError("max_seq_len exceeds the width of req_to_token")


@dataclass
class FullMetadataTensors:
    """Full per-step metadata, as sglang's DeepSeek-V4 backend builds it. Shapes with N tokens,
    bs requests.

    token_req                int64 [N]    request (batch row) of each token
    token_pool_idx           int64 [N]    req_pool_indices[token_req] (req_pool_indices_repeated)
    seq_lens_casual          int32 [N]    causal length each token sees
    positions_casual         int32 [N]    seq_lens_casual - 1
    page_table               int32 [N, num_pages]   req_to_token[row, 256*i] // 256
    swa_page_indices         int32 [N, pad64(128)]  SWA slot of position pos-j; -1 if pos-j < 0
    swa_topk_lengths         int32 [N]    min(len, 128)
    swa_out_cache_loc        int32 [N]    full_to_swa[out_cache_loc]
    c4_out_loc               int64 [N]    out_cache_loc // 4 if len % 4 == 0 else NULL_SLOT (0)
    c4_topk_lengths_raw      int32 [N]    len // 4
    c4_topk_lengths_clamp1   int32 [N]    max(len // 4, 1)
    c128_out_loc             int64 [N]    as c4 with ratio 128
    c128_topk_lengths_raw    int32 [N]    len // 128
    c128_topk_lengths_clamp1 int32 [N]    max(len // 128, 1)
    c128_page_indices        int32 [N, pad64(2*num_pages)]  column j (< len//128):
                                          page_table[row, j//2]*2 + j%2, else -1
    c4_sparse_topk_lengths   int32 [N]    min(c4_topk_lengths_clamp1, index_topk)
    c4_sparse_page_indices   int32 [N, pad64(index_topk)]  all -1 (the indexer fills it)
    indexer_topk_schedule    int32 [N+1, 2]  row 0 = (threshold, count); rows 1..count =
                                          (token, c4_topk_lengths_raw) of tokens whose raw c4
                                          length > threshold, in token order; rest (-1, 0)
    """

    token_req: Tensor
    token_pool_idx: Tensor
    seq_lens_casual: Tensor
    positions_casual: Tensor
    page_table: Tensor
    swa_page_indices: Tensor
    swa_topk_lengths: Tensor
    swa_out_cache_loc: Tensor
    c4_out_loc: Tensor
    c4_topk_lengths_raw: Tensor
    c4_topk_lengths_clamp1: Tensor
    c128_out_loc: Tensor
    c128_topk_lengths_raw: Tensor
    c128_topk_lengths_clamp1: Tensor
    c128_page_indices: Tensor
    c4_sparse_topk_lengths: Tensor
    c4_sparse_page_indices: Tensor
    indexer_topk_schedule: Tensor

    def as_dict(self) -> dict[str, Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def copy_(self, other: FullMetadataTensors) -> None:
        """Device-to-device copy into these (e.g. graph-captured) buffers; shapes must match."""
        for f in fields(self):
            getattr(self, f.name).copy_(getattr(other, f.name))


@runtime_checkable
class MetadataOps(Protocol):
    """One implementation of every metadata op. All are sync-free; sizes are host ints."""

    name: str

    def expand_lengths(
        self, base_lens: Tensor, extend_lens: Tensor | int, num_tokens: int
    ) -> tuple[Tensor, Tensor]:
        """-> (token_req int64 [N], seq_lens_casual int32 [N]).

        Tokens of request r are contiguous; token k of request r gets base_lens[r] + k + 1.
        extend_lens: int32 [bs] tokens per request, or a host int T (uniform, N = bs*T).
        Tokens past the real total are padding: request bs-1, length 1.
        Verify: base = seq_lens (L -> L+1..L+D); decode: base = seq_lens - 1, T = 1;
        prefill/draft-extend: base = seq_lens - extend_lens.
        """
        ...

    def page_table(
        self,
        req_to_token: Tensor,
        token_pool_idx: Tensor,
        num_pages: int,
        page_size: int = KV_PAGE_SIZE,
    ) -> Tensor:
        """-> int32 [N, num_pages]: req_to_token[token_pool_idx, i*page_size] // page_size."""
        ...

    def swa_indices(
        self,
        req_to_token: Tensor,
        token_pool_idx: Tensor,
        seq_lens_casual: Tensor,
        full_to_swa: Tensor,
        window: int = SWA_WINDOW,
    ) -> tuple[Tensor, Tensor]:
        """-> (swa_page_indices int32 [N, pad64(window)], swa_topk_lengths int32 [N]).

        Column j: full_to_swa[req_to_token[row, pos - j]] with pos = len - 1; -1 where
        pos - j < 0 and in padding columns. Lengths: min(len, window).
        """
        ...

    def compression(
        self, seq_lens_casual: Tensor, out_cache_loc: Tensor, ratio: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """-> (out_loc int64 [N], topk_lengths_raw int32 [N], topk_lengths_clamp1 int32 [N]).

        out_loc = out_cache_loc // ratio where len % ratio == 0 else NULL_SLOT (0);
        raw = len // ratio; clamp1 = max(raw, 1).
        """
        ...

    def c128_page_indices(
        self,
        req_to_token: Tensor,
        token_pool_idx: Tensor,
        seq_lens_casual: Tensor,
        num_pages: int,
        page_size: int = KV_PAGE_SIZE,
    ) -> Tensor:
        """-> int32 [N, c128_width(num_pages)]. With q = page_size // 128, column j holds
        (req_to_token[row, (j // q) * page_size] // page_size) * q + j % q where
        j < len // 128 and j < num_pages * q, else -1."""
        ...

    def sparse_buffers(
        self, c4_topk_lengths_clamp1: Tensor, index_topk: int
    ) -> tuple[Tensor, Tensor]:
        """-> (c4_sparse_topk_lengths int32 [N] = min(clamp1, index_topk),
        c4_sparse_page_indices int32 [N, pad64(index_topk)] filled with -1)."""
        ...

    def topk_schedule(
        self, c4_topk_lengths_raw: Tensor, threshold: int = TOPK_CLUSTER_THRESHOLD
    ) -> Tensor:
        """-> int32 [N+1, 2]: row 0 = (threshold, count); rows 1..count = (token index,
        c4 length) of the tokens with length > threshold, in token order; other rows (-1, 0)."""
        ...

    def swa_out_cache_loc(self, out_cache_loc: Tensor, full_to_swa: Tensor) -> Tensor:
        """-> int32 [N]: full_to_swa[out_cache_loc]."""
        ...

    def upgrade(self, inputs: UpgradeInputs) -> FullMetadataTensors:
        """The whole in-graph upgrade raw -> full (one call per step, shared by all layers)."""
        ...


# name -> "module:attribute" of a zero-argument factory; imported lazily so that importing
# `kernels` never imports triton.
_REGISTRY: dict[str, str] = {
    "torch": "kernels.reference:TorchOps",
    "triton": "kernels.triton_ops:TritonOps",
}
_REQUIRES: dict[str, str] = {"triton": "triton"}
_CACHE: dict[str, MetadataOps] = {}


def register_ops(name: str, factory: str | Callable[[], MetadataOps]) -> None:
    """Add an implementation: a factory or "module:attribute" path to one."""
    if name in _REGISTRY:
        raise ValueError(f"ops {name!r} already registered")
    _REGISTRY[name] = factory  # type: ignore[assignment]


def available_ops() -> list[str]:
    """Registered implementations whose dependencies are importable here."""
    return [
        name
        for name in _REGISTRY
        if name not in _REQUIRES or importlib.util.find_spec(_REQUIRES[name]) is not None
    ]


def get_ops(name: str = "torch") -> MetadataOps:
    """The implementation called `name` ("torch" = PyTorch reference composite, "triton")."""
    if name in _CACHE:
        return _CACHE[name]
    if name not in _REGISTRY:
        raise KeyError(f"unknown kernels ops {name!r}; known: {sorted(_REGISTRY)}")
    if name not in available_ops():
        raise ImportError(f"kernels ops {name!r} needs the {_REQUIRES[name]!r} package")
    factory = _REGISTRY[name]
    if isinstance(factory, str):
        mod, attr = factory.split(":")
        factory = getattr(importlib.import_module(mod), attr)
    ops = factory()
    _CACHE[name] = ops
    return ops
