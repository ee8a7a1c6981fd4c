"""Seeded scheduler: evolves a running batch step by step on the host.

It is the simulator's oracle: it knows every request's committed KV length (what the real host
knows for non-speculative decoding, and what the device knows for EAGLE). The world turns its
plans into device batches; the host mirror the backend sees comes only from a mirror producer.

Per step the plan is one of
- ``decode``: every running request advances (by 1 without speculation, by a drawn accept
  length with EAGLE; the draws are part of the plan, so a seed fixes the whole run);
- ``prefill``: waiting requests are admitted with an EXTEND pass (every ``prefill_every`` steps;
  when nobody is waiting the request closest to its end stops early so the rate holds).
Requests finish (output budget spent or context full) and new ones arrive to replace them, so
the batch composition changes while its size stays ``batch_size``. With ``prefill_every = 0``
arrivals join directly with their prompt already in the KV cache (a decode instance of a
prefill/decode-disaggregated deployment). A finished request's pages go back to the host free
lists only, and SWA pages behind the window every step: the device frees upstream makes for
them, and their syncs, are the request lifecycle's (harness.lifecycle).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.batch.info import SpecInfo
from harness.batch.pool import ReqToTokenPool
from harness.serving.accept import AcceptConfig, AcceptSampler

PADDING_REQ = 0  # request row 0 is the CUDA-graph padding row: never given to a request


@dataclass(frozen=True)
class SchedulerConfig:
    batch_size: int = 32
    context_len: int = 4096
    seed: int = 0
    prefill_every: int = 0
    spec: SpecInfo | None = None
    accept: AcceptConfig = field(default_factory=AcceptConfig)
    init_len_frac: tuple[float, float] = (0.05, 0.9)  # initial lengths, fraction of context
    prompt_len: tuple[int, int] = (32, 256)  # tokens of an arriving request's prompt
    cached_prefix_frac: float = 0.5  # up to this share of a prompt is a prefix-cache hit
    output_len: tuple[int, int] = (32, 768)  # tokens a request generates before it stops

    def __post_init__(self) -> None:
        # 0: no requests ever (a DP-attention rank that only runs IDLE batches)
        if self.batch_size < 0:
            raise ValueError("batch_size must be >= 0")
        if self.prefill_every < 0:
            raise ValueError("prefill_every must be >= 0 (0 = never)")
        if self.batch_size == 0 and self.prefill_every:
            raise ValueError("a scheduler without requests has nothing to prefill")
        need = min_context_len(self.prompt_len, self.spec)
        if need > self.context_len:
            raise ValueError(
                f"context_len {self.context_len} too small for the prompt lengths (needs {need})"
            )

    @property
    def tokens_per_step(self) -> int:
        return tokens_per_step(self.spec)


def tokens_per_step(spec: SpecInfo | None) -> int:
    """KV positions a decode step may write per request (draft tokens with EAGLE)."""
    return spec.draft_token_num if spec else 1


def min_context_len(prompt_len: tuple[int, int], spec: SpecInfo | None) -> int:
    """The shortest context a request fits in: the longest arriving prompt, one step's writes
    and the one position more the scheduler keeps free (`Scheduler._max_len`)."""
    return prompt_len[1] + tokens_per_step(spec) + 1


@dataclass
class Request:
    rid: int
    pool_idx: int
    seq_len: int  # committed tokens in the KV cache
    remaining: int  # output tokens still to generate


@dataclass(frozen=True)
class PrefillItem:
    pool_idx: int
    prefix_len: int
    extend_len: int

    @property
    def seq_len(self) -> int:
        return self.prefix_len + self.extend_len


@dataclass(frozen=True)
class StepPlan:
    index: int
    kind: str  # "decode" | "prefill"
    pool_indices: tuple[int, ...]  # rows of this step's batch, in batch order
    seq_lens: tuple[int, ...]  # committed lengths before the step (prefill: after it)
    accept_lens: tuple[int, ...] | None = None  # EAGLE decode only
    prefill: tuple[PrefillItem, ...] = ()
    admitted_direct: tuple[tuple[int, int], ...] = ()  # (pool_idx, seq_len) joined with KV

    @property
    def batch_size(self) -> int:
        return len(self.pool_indices)


def decode_plan(
    index: int,
    running: Sequence[Any],
    accept: AcceptSampler | None,
    rng: random.Random,
    **extra: Any,
) -> StepPlan:
    """The decode step of the running requests (anything with `pool_idx` and `seq_len`), with
    their drafts' accepted lengths drawn when speculating."""
    return StepPlan(
        index=index,
        kind="decode",
        pool_indices=tuple(r.pool_idx for r in running),
        seq_lens=tuple(r.seq_len for r in running),
        accept_lens=None if accept is None else tuple(accept(rng, len(running))),
        **extra,
    )


def prefill_plan(index: int, items: Sequence[PrefillItem], **extra: Any) -> StepPlan:
    """The prefill step of `items`."""
    return StepPlan(
        index=index,
        kind="prefill",
        pool_indices=tuple(i.pool_idx for i in items),
        seq_lens=tuple(i.seq_len for i in items),
        prefill=tuple(items),
        **extra,
    )


class Scheduler:
    def __init__(self, cfg: SchedulerConfig, pool: ReqToTokenPool):
        self.cfg = cfg
        self.pool = pool
        self.rng = random.Random(cfg.seed)
        self._accept = cfg.accept.sampler(cfg.spec.draft_token_num) if cfg.spec else None
        self._next_rid = 0
        self._index = 0
        self.running: list[Request] = []
        self.waiting: list[int] = []  # prompt lengths of arrived requests
        self.finished_total = 0
        self._pending: dict[int, Request] = {}  # prefilled this step, join at commit
        pad = pool.alloc_req()
        assert pad == PADDING_REQ, "the padding row must be request row 0"
        lo, hi = cfg.init_len_frac
        max_len = self._max_len()
        for _ in range(cfg.batch_size):
            length = self.rng.randint(
                max(1, int(lo * cfg.context_len)), max(1, min(int(hi * cfg.context_len), max_len))
            )
            self.running.append(self._new_request(length))

    # ---- public ---------------------------------------------------------------------------
    def schedule(self) -> StepPlan:
        """Plan the next step (allocates pool rows and KV slots; the world runs it)."""
        index = self._index
        self._index += 1
        direct = self._admit_direct()
        cfg = self.cfg
        if cfg.prefill_every and index % cfg.prefill_every == cfg.prefill_every - 1:
            if not self.waiting:
                self._stop_earliest()
            return self._plan_prefill(index, direct)
        return self._plan_decode(index, direct)

    def peek(self) -> tuple[str, int]:
        """(kind, batch size) of the next plan, without planning it (no side effects)."""
        cfg = self.cfg
        if cfg.prefill_every and self._index % cfg.prefill_every == cfg.prefill_every - 1:
            return "prefill", max(1, len(self.waiting))
        direct = 0 if cfg.prefill_every else len(self.waiting)
        return "decode", len(self.running) + direct

    def commit(self, plan: StepPlan) -> list[int]:
        """Apply a finished step's outcome; returns the pool rows freed."""
        if plan.kind == "prefill":
            for item in plan.prefill:
                req = self._pending.pop(item.pool_idx)
                self.running.append(req)
            return []
        by_idx = {r.pool_idx: r for r in self.running}
        advance = plan.accept_lens or (1,) * plan.batch_size
        for idx, step in zip(plan.pool_indices, advance):
            req = by_idx[idx]
            req.seq_len += step
            req.remaining -= step
            self.pool.evict_swa(idx, req.seq_len)
        freed = []
        limit = self._max_len()
        for req in list(self.running):
            if req.remaining <= 0 or req.seq_len > limit:
                self._finish(req)
                freed.append(req.pool_idx)
        return freed

    def lengths(self) -> dict[int, int]:
        """Oracle: committed length of every running request, by pool row."""
        return {r.pool_idx: r.seq_len for r in self.running}

    # ---- internals ------------------------------------------------------------------------
    def _max_len(self) -> int:
        # Leave room for one more step's writes (draft tokens) inside the context.
        return self.cfg.context_len - self.cfg.tokens_per_step - 1

    def _new_request(self, seq_len: int) -> Request:
        idx = self.pool.alloc_req()
        self.pool.reserve(idx, seq_len)
        lo, hi = self.cfg.output_len
        req = Request(self._next_rid, idx, seq_len, self.rng.randint(lo, hi))
        self._next_rid += 1
        return req

    def _arrive(self) -> None:
        self.waiting.append(self.rng.randint(*self.cfg.prompt_len))

    def _finish(self, req: Request) -> None:
        self.running.remove(req)
        self.pool.free_req(req.pool_idx)
        self.finished_total += 1
        self._arrive()

    def _stop_earliest(self) -> None:
        req = min(self.running, key=lambda r: (r.remaining, r.rid))
        self._finish(req)

    def _admit_direct(self) -> tuple[tuple[int, int], ...]:
        if self.cfg.prefill_every:
            return ()
        out = []
        while self.waiting:
            req = self._new_request(self.waiting.pop(0))
            self.running.append(req)
            out.append((req.pool_idx, req.seq_len))
        return tuple(out)

    def _plan_prefill(self, index: int, direct: tuple) -> StepPlan:
        self._pending = {}
        items = []
        while self.waiting:
            prompt = self.waiting.pop(0)
            prefix = self.rng.randint(0, int(prompt * self.cfg.cached_prefix_frac))
            req = self._new_request(prompt)
            self._pending[req.pool_idx] = req
            items.append(PrefillItem(req.pool_idx, prefix, prompt - prefix))
        return prefill_plan(index, items, admitted_direct=direct)

    def _plan_decode(self, index: int, direct: tuple) -> StepPlan:
        width = self.cfg.tokens_per_step
        for req in self.running:
            self.pool.reserve(req.pool_idx, req.seq_len + width)
        return decode_plan(index, self.running, self._accept, self.rng, admitted_direct=direct)
