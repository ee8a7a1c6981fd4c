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

Freeing can also run upstream's device operations (sglang 504570f4's SWA allocator over two
paged allocators, behind the chunk cache of a server without the radix cache): a finished
request's KV (``release_kv``: ``ChunkCache.cache_finished_req``, chunk_cache.py 79-85) and
the SWA slots behind the window (``free_swa_out_of_window``: mem_cache/common.py 69-110),
each through ``free_swa`` (allocator/swa.py 347-359) and the paged allocators' ``free``
(allocator/paged.py 261-270). Those make the syncs upstream makes (L01-L04 of the fidelity
table); the host lists stay the truth of what is free.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

KV_PAGE_SIZE = 256
SWA_PAGE_SIZE = 128
SWA_WINDOW = 128


class PagedFreeList:
    """The device side of upstream's paged allocator ``free`` (allocator/paged.py 261-270):
    the freed slots' pages, made unique on the device, go to the front of its device list of
    released pages. Allocation stays on the host, so nothing here reads the list back."""

    def __init__(self, page_size: int, dtype: torch.dtype, device: torch.device):
        self.page_size = page_size
        self.released = torch.empty(0, dtype=dtype, device=device)

    def free(self, free_index: torch.Tensor) -> None:
        if free_index.numel() == 0:
            return
        pages = torch.unique(free_index // self.page_size)  # fidelity: L01
        self.released = torch.cat((pages.to(self.released.dtype), self.released))


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
        # upstream's device free lists: the full pool's pages and the SWA pool's pages
        self.full_free = PagedFreeList(cfg.page_size, torch.int32, device)
        self.swa_free = PagedFreeList(cfg.swa_page_size, torch.int64, device)

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
        ps, sps = self.page_size, self.swa_page_size
        need = -(-length // ps)
        slots: list[tuple[int, int, int]] = []  # (position, full slot, count)
        while len(req.pages) < need:
            if not self._free_pages:
                raise RuntimeError("KV pool exhausted")
            block = len(req.pages)
            page = self._free_pages.pop()
            req.pages.append(page)
            lo = block * ps
            slots.append((lo, page * ps, min(ps, self.width - lo)))
        if slots:  # the row's view is a device op of its own: none when no page is new
            self._write_runs(self.req_to_token[idx], slots)
        per_full = ps // sps
        swa: list[tuple[int, int, int]] = []  # (full slot, SWA slot, count)
        for sblock in range(req.swa_evicted_below, -(-length // sps)):
            if sblock in req.swa_pages:
                continue
            if not self._free_swa:
                raise RuntimeError("SWA pool exhausted")
            spage = self._free_swa.pop()
            req.swa_pages[sblock] = spage
            full_page = req.pages[sblock // per_full]
            swa.append((full_page * ps + (sblock % per_full) * sps, spage * sps, sps))
        self._write_runs(self.full_to_swa, swa)

    def _write_runs(self, table: torch.Tensor, spans: list[tuple[int, int, int]]) -> None:
        """``table[start + i] = value + i`` for each ``(start, value, count)`` span: one
        ``arange`` write per run of spans that continue each other in both (no sync)."""
        runs: list[tuple[int, int, int]] = []  # (lo, hi, first value)
        for start, value, count in spans:
            if runs and runs[-1][1] == start and runs[-1][2] + start - runs[-1][0] == value:
                runs[-1] = (runs[-1][0], start + count, runs[-1][2])
            else:
                runs.append((start, start + count, value))
        for lo, hi, first in runs:
            torch.arange(first, first + hi - lo, out=table[lo:hi])

    def evict_swa(self, idx: int, seq_len: int, window: int = SWA_WINDOW) -> None:
        """Release SWA pages whose positions all lie before ``seq_len - window`` (no query of
        this request can attend to them any more), on the host only."""
        self._release_swa_below(idx, max(seq_len - window, 0))

    def _release_swa_below(self, idx: int, pos: int) -> None:
        """Host lists: the request's SWA pages wholly before position ``pos`` are free."""
        req = self._reqs[idx]
        keep_from = pos // self.swa_page_size
        for sblock in range(req.swa_evicted_below, keep_from):
            spage = req.swa_pages.pop(sblock, None)
            if spage is not None:
                self._free_swa.append(spage)
        req.swa_evicted_below = max(req.swa_evicted_below, keep_from)

    # ---- freeing as upstream does on the device --------------------------------------------
    def release_kv(self, idx: int, committed: int, allocated: int) -> None:
        """A finished request's KV (``release_kv_cache``, mem_cache/common.py 635-689): its
        first ``committed`` slots (``ChunkCache.cache_finished_req``, chunk_cache.py 80-85),
        then those allocated past them from the next page on (speculative decoding's draft
        slots, l.659-679), each through the SWA allocator's ``free`` (swa.py 318-325: the full
        pool's, then ``free_swa``); then its row."""
        spans = [(0, committed)]
        start = -(-committed // self.page_size) * self.page_size  # ceil_align (l.673)
        if start < allocated:
            spans.append((start, allocated))
        for lo, hi in spans:
            kv = self.req_to_token[idx, lo:hi]
            self.full_free.free(kv)
            self.free_swa(kv)
        self.free_req(idx)

    def free_swa_out_of_window(self, idx: int, pre_len: int, evicted: int) -> int:
        """``free_swa_out_of_window_slots`` of the chunk cache (mem_cache/common.py 69-110):
        SWA slots from ``evicted`` up to ``pre_len - window``, floored to a page, are freed
        when that passes ``evicted`` (after each page the request crosses). Returns the new
        evicted length."""
        page = self.page_size
        new = max(evicted, pre_len - SWA_WINDOW) // page * page
        if new <= evicted:
            return evicted
        self.free_swa(self.req_to_token[idx, evicted:new])  # common.py 108-110
        self._release_swa_below(idx, new)
        return new

    def free_swa(self, free_index: torch.Tensor) -> None:
        """``SWATokenToKVPoolAllocator.free_swa`` (swa.py 347-359): the full pages of the
        slots, their SWA slots through a mask of the mapped ones, freed to the SWA pool, and
        the mapping cleared."""
        if free_index.numel() == 0:
            return
        pages = torch.unique(free_index // self.page_size)  # fidelity: L02
        offsets = torch.arange(self.page_size, dtype=pages.dtype, device=self.device)
        mapping = (pages[:, None] * self.page_size + offsets[None, :]).reshape(-1).long()
        swa = self.full_to_swa[mapping]
        swa = swa[swa > 0]  # fidelity: L03
        self.swa_free.free(swa)
        self.full_to_swa[mapping] = 0  # fidelity: L04

    def slot(self, idx: int, pos: int) -> int:
        """Host-known full-space slot of position ``pos`` (no device read)."""
        req = self._reqs[idx]
        return req.pages[pos // self.page_size] * self.page_size + pos % self.page_size

    def slots(self, idx: int, start: int, end: int) -> list[int]:
        return [self.slot(idx, p) for p in range(start, end)]
