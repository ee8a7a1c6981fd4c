"""Request pool (``req_to_token``) and a paged KV allocator with full -> SWA slot translation.

Model of sglang's paged pools, just enough for the metadata paths:
- full KV slots are paged by ``page_size`` (256): slot = page * 256 + offset, page 0 is reserved
  (padded rows write to slot 0), so ``req_to_token[:, ::256] // 256`` is a request's page table;
- the SWA pool pages by ``swa_page_size`` (128); ``full_to_swa[full_slot]`` is the SWA slot of a
  token. SWA pages are handed out from a shuffled free list so the translation is not the
  identity (a backend that forgot to translate would be caught);
- SWA pages wholly behind the window are released (``evict_swa``), as the SWA pool is small.

All bookkeeping of which page belongs to whom is on the host; device writes use Python-int
slices and ``torch.arange(device=dev)``, so allocating never syncs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

KV_PAGE_SIZE = 256
SWA_PAGE_SIZE = 128
SWA_WINDOW = 128


@dataclass(frozen=True)
class PoolConfig:
    max_reqs: int = 64
    context_len: int = 4096
    draft_slots: int = 8  # extra req_to_token columns for draft tokens beyond the context
    kv_pages: int | None = None  # default: enough for every request at full width (+ page 0)
    swa_pages: int | None = None  # default: same capacity as the full pool
    page_size: int = KV_PAGE_SIZE
    swa_page_size: int = SWA_PAGE_SIZE
    seed: int = 0

    @property
    def width(self) -> int:
        return self.context_len + self.draft_slots

    @property
    def pages_per_req(self) -> int:
        return -(-self.width // self.page_size)

    @property
    def kv_page_count(self) -> int:
        return self.kv_pages or self.max_reqs * self.pages_per_req + 1

    @property
    def swa_page_count(self) -> int:
        per_full = self.page_size // self.swa_page_size
        return self.swa_pages or (self.kv_page_count - 1) * per_full + 1

    @property
    def device_bytes(self) -> int:
        """Device memory of the pool: req_to_token (int32) and full_to_swa (int64 per slot)."""
        return self.max_reqs * self.width * 4 + self.kv_page_count * self.page_size * 8

    @property
    def host_bytes(self) -> int:
        """Host memory of its free lists: a Python int and a list slot per page (≈ 36 B)."""
        return (self.kv_page_count + self.swa_page_count) * 36


@dataclass
class _Req:
    pages: list[int] = field(default_factory=list)  # full page of each 256-position block
    swa_pages: dict[int, int] = field(default_factory=dict)  # SWA block index -> SWA page
    swa_evicted_below: int = 0  # SWA blocks below this index were released


class ReqToTokenPool:
    """``req_to_token`` int32 [max_reqs, context_len + draft_slots] on the device, plus the
    full and SWA page allocators that fill it."""

    def __init__(self, cfg: PoolConfig, device: torch.device):
        self.cfg = cfg
        self.device = device
        self.page_size = cfg.page_size
        self.swa_page_size = cfg.swa_page_size
        assert cfg.page_size % cfg.swa_page_size == 0
        kv_pages, swa_pages = cfg.kv_page_count, cfg.swa_page_count
        self.num_kv_slots = kv_pages * cfg.page_size
        self.req_to_token = torch.zeros((cfg.max_reqs, cfg.width), dtype=torch.int32, device=device)
        # Slot 0 (padding) maps to SWA slot 0; unallocated slots map to 0 as well.
        self.full_to_swa = torch.zeros(self.num_kv_slots, dtype=torch.int64, device=device)
        rng = random.Random(cfg.seed)
        self._free_pages = list(range(kv_pages - 1, 0, -1))  # pop() hands out low pages first
        self._free_swa = list(range(1, swa_pages))
        rng.shuffle(self._free_swa)
        self._free_reqs = list(range(cfg.max_reqs - 1, -1, -1))
        self._reqs: dict[int, _Req] = {}

    # ---- requests -------------------------------------------------------------------------
    @property
    def width(self) -> int:
        return self.cfg.width

    def alloc_req(self) -> int:
        if not self._free_reqs:
            raise RuntimeError("request pool exhausted")
        idx = self._free_reqs.pop()
        self._reqs[idx] = _Req()
        return idx

    def free_req(self, idx: int) -> None:
        req = self._reqs.pop(idx)
        self._free_pages.extend(reversed(req.pages))
        self._free_swa.extend(req.swa_pages.values())
        self._free_reqs.append(idx)
        # Stale req_to_token entries are harmless (never read beyond seq_len) but zeroing keeps
        # the pool's content deterministic for tests.
        self.req_to_token[idx].zero_()

    # ---- KV slots -------------------------------------------------------------------------
    def reserve(self, idx: int, length: int) -> None:
        """Make positions [0, length) of request ``idx`` backed by full and SWA slots."""
        assert length <= self.width, f"length {length} beyond req_to_token width {self.width}"
        req = self._reqs[idx]
        need = -(-length // self.page_size)
        while len(req.pages) < need:
            if not self._free_pages:
                raise RuntimeError("KV pool exhausted")
            block = len(req.pages)
            page = self._free_pages.pop()
            req.pages.append(page)
            lo = block * self.page_size
            hi = min(lo + self.page_size, self.width)
            slots = (
                torch.arange(hi - lo, dtype=torch.int32, device=self.device) + page * self.page_size
            )
            self.req_to_token[idx, lo:hi] = slots
        per_full = self.page_size // self.swa_page_size
        swa_need = -(-length // self.swa_page_size)
        for sblock in range(req.swa_evicted_below, swa_need):
            if sblock in req.swa_pages:
                continue
            if not self._free_swa:
                raise RuntimeError("SWA pool exhausted")
            spage = self._free_swa.pop()
            req.swa_pages[sblock] = spage
            full_page = req.pages[sblock // per_full]
            lo = full_page * self.page_size + (sblock % per_full) * self.swa_page_size
            swa = torch.arange(self.swa_page_size, dtype=torch.int64, device=self.device)
            self.full_to_swa[lo : lo + self.swa_page_size] = swa + spage * self.swa_page_size

    def evict_swa(self, idx: int, seq_len: int, window: int = SWA_WINDOW) -> None:
        """Release SWA pages whose positions all lie before ``seq_len - window`` (no query of
        this request can attend to them any more)."""
        req = self._reqs[idx]
        keep_from = max(seq_len - window, 0) // self.swa_page_size
        for sblock in range(req.swa_evicted_below, keep_from):
            spage = req.swa_pages.pop(sblock, None)
            if spage is not None:
                self._free_swa.append(spage)
        req.swa_evicted_below = max(req.swa_evicted_below, keep_from)

    def slot(self, idx: int, pos: int) -> int:
        """Host-known full-space slot of position ``pos`` (no device read)."""
        req = self._reqs[idx]
        return req.pages[pos // self.page_size] * self.page_size + pos % self.page_size

    def slots(self, idx: int, start: int, end: int) -> list[int]:
        return [self.slot(idx, p) for p in range(start, end)]
