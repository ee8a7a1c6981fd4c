"""Metadata objects: raw (built out of graph, prep in graph) and full (what attention reads).

Copies (``copy_``) are device-to-device into graph-captured objects; shapes must match.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

from kernels import FullMetadataTensors

# Fields of ``kernels.api.FullMetadataTensors``, in report order. The compression fields are None for
# draft-extend (SWA only upstream: need_compress=False).
CORE_FIELDS = (
    "token_req",
    "token_pool_idx",
    "seq_lens_casual",
    "positions_casual",
    "page_table",
    "swa_page_indices",
    "swa_topk_lengths",
    "swa_out_cache_loc",
    "raw_out_loc",
)
COMPRESS_FIELDS = (
    "c4_out_loc",
    "c4_topk_lengths_raw",
    "c4_topk_lengths_clamp1",
    "c128_out_loc",
    "c128_topk_lengths_raw",
    "c128_topk_lengths_clamp1",
    "c128_page_indices",
    "c4_sparse_topk_lengths",
    "c4_sparse_page_indices",
    "indexer_topk_schedule",
)
PLAN_FIELDS = ("c4_compress_plan", "c128_compress_plan")


@dataclass
class RawDecodeMetadata:
    """Decode / draft-decode / idle with prep in graph: the upgrade runs in graph."""

    req_pool_indices: torch.Tensor
    seq_lens: torch.Tensor  # int32 [bs], length including the token decoded
    out_cache_loc: torch.Tensor  # int64 [bs] (draft decode: [bs * topk * num_steps])

    def copy_(self, other: RawDecodeMetadata) -> None:
        self.req_pool_indices.copy_(other.req_pool_indices)
        self.seq_lens.copy_(other.seq_lens)
        self.out_cache_loc.copy_(other.out_cache_loc)


@dataclass
class RawVerifyMetadata:
    """Target verify with prep in graph."""

    req_pool_indices: torch.Tensor
    seq_lens: torch.Tensor  # int32 [bs], committed length before the draft tokens
    out_cache_loc: torch.Tensor  # int64 [bs * D]
    extend_seq_lens: torch.Tensor  # int32 [bs], a view of the persistent 1025-long buffer
    seq_lens_cpu: list[int] | None = None  # host lengths (F03); None without the mirror

    def copy_(self, other: RawVerifyMetadata) -> None:
        self.req_pool_indices.copy_(other.req_pool_indices)
        self.seq_lens.copy_(other.seq_lens)
        self.out_cache_loc.copy_(other.out_cache_loc)
        self.extend_seq_lens = other.extend_seq_lens
        self.seq_lens_cpu = other.seq_lens_cpu


@dataclass
class FullMetadata:
    """Full metadata of one step (``kernels.api.FullMetadataTensors``), shared by all layers."""

    token_req: torch.Tensor
    token_pool_idx: torch.Tensor
    seq_lens_casual: torch.Tensor
    positions_casual: torch.Tensor
    page_table: torch.Tensor
    swa_page_indices: torch.Tensor
    swa_topk_lengths: torch.Tensor
    swa_out_cache_loc: torch.Tensor
    raw_out_loc: torch.Tensor
    index_topk: int
    c4_out_loc: torch.Tensor | None = None
    c4_topk_lengths_raw: torch.Tensor | None = None
    c4_topk_lengths_clamp1: torch.Tensor | None = None
    c128_out_loc: torch.Tensor | None = None
    c128_topk_lengths_raw: torch.Tensor | None = None
    c128_topk_lengths_clamp1: torch.Tensor | None = None
    c128_page_indices: torch.Tensor | None = None
    c4_sparse_topk_lengths: torch.Tensor | None = None
    c4_sparse_page_indices: torch.Tensor | None = None
    indexer_topk_schedule: torch.Tensor | None = None
    # Prefill only: per request and ratio (first group, groups completed, token start).
    c4_compress_plan: torch.Tensor | None = None
    c128_compress_plan: torch.Tensor | None = None
    # Draft decode with prep off: the shared [bs * topk * num_steps] out-location buffer, so
    # the in-graph part can take its own step's slice after a copy from step 0.
    draft_out_cache_loc: torch.Tensor | None = None
    # The raw metadata this was upgraded from (prep in graph); lets a graph capture re-run
    # the upgrade after warm-up without the caller restoring anything.
    source_raw: RawDecodeMetadata | RawVerifyMetadata | None = field(default=None, repr=False)

    @classmethod
    def from_tensors(
        cls, t: FullMetadataTensors, raw_out_loc: torch.Tensor, index_topk: int, **extra
    ) -> FullMetadata:
        return cls(**t.as_dict(), raw_out_loc=raw_out_loc, index_topk=index_topk, **extra)

    @property
    def num_tokens(self) -> int:
        return int(self.seq_lens_casual.shape[0])

    @property
    def has_compression(self) -> bool:
        return self.c4_out_loc is not None

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every metadata tensor that is present, by field name (for comparisons)."""
        names = CORE_FIELDS + COMPRESS_FIELDS + PLAN_FIELDS
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def copy_(self, other: FullMetadata) -> None:
        assert self.index_topk == other.index_topk
        for f in fields(self):
            dst, src = getattr(self, f.name), getattr(other, f.name)
            if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                dst.copy_(src)
            elif f.name != "index_topk":
                setattr(self, f.name, src)


AnyMetadata = RawDecodeMetadata | RawVerifyMetadata | FullMetadata
