"""A scheduler whose batch changes from step to step: requests arrive, are prefilled, decode
and finish, and their KV is freed as sglang 504570f4 frees it.

Per scheduler iteration, as upstream's ``get_next_batch_to_run`` with the overlap of a
prefill before the running batch: a prefill of waiting requests when any wait and a row is
free (as many as fit the running cap and ``max_prefill_tokens``; no prefix is cached, as in
the chunk cache), else a decode step of every running request. Requests arriving during an
iteration (a Poisson draw) wait for the next one; an empty server waits for the next arrival.

The device work of the lifecycle (harness.batch.pool), each where upstream does it:
- a decode step on a sweep iteration (the scheduler's forward count a multiple of the
  interval, schedule_batch.py 2960-2961) frees the SWA slots that fell behind the window of
  each request that decoded before (l.2967-2968), in its prepare;
- a finished request's KV is freed when the step's outcome is taken (``release_kv_cache``),
  and with speculative decoding the slots allocated past the committed ones from the next page
  on (common.py 659-679).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from harness.batch.info import SpecInfo
from harness.batch.pool import ReqToTokenPool
from harness.lifecycle.section import LifecycleConfig
from harness.serving.accept import AcceptConfig
from harness.serving.scheduler import (
    PADDING_REQ,
    PrefillItem,
    StepPlan,
    decode_plan,
    prefill_plan,
    tokens_per_step,
)


@dataclass
class _Request:
    pool_idx: int
    seq_len: int  # committed tokens in the KV cache
    remaining: int  # output tokens still to generate
    allocated: int = 0  # KV positions backed by slots (committed + a step's draft tokens)
    decodes: int = 0  # decode batches it ran in (upstream's decode_batch_idx)
    swa_evicted: int = 0  # SWA slots before this position are freed (swa_evicted_seqlen)


class LifecycleScheduler:
    def __init__(
        self,
        cfg: LifecycleConfig,
        *,
        max_running: int,
        context_len: int,
        spec: SpecInfo | None,
        accept: AcceptConfig,
        seed: int,
        pool: ReqToTokenPool,
        first_iteration: int = 0,
    ):
        self.cfg = cfg
        self.max_running = max_running
        self.pool = pool
        self.spec = spec
        self.width = tokens_per_step(spec)
        self.max_len = context_len - self.width - 1  # room for one more step's writes
        self.rng = random.Random(seed)
        self._accept = accept.sampler(spec.draft_token_num) if spec else None
        self.forward_ct = first_iteration  # forward batches run so far (upstream's forward_ct)
        self.running: list[_Request] = []
        self.waiting: list[tuple[int, int]] = []  # (prompt, output) of arrived requests
        self.finished_total = 0
        self._pending: dict[int, _Request] = {}
        assert pool.alloc_req() == PADDING_REQ, "the padding row must be request row 0"
        for _ in range(min(cfg.initial_running, max_running)):
            self.running.append(self._mid_flight())
        for _ in range(cfg.initial_requests):
            self.waiting.append(self._draw_request())
        self._wait_for_work()

    # ---- the scheduler's interface (harness.serving.world) --------------------------------
    def peek(self) -> tuple[str, int]:
        """(kind, batch size) of the next plan, without planning it."""
        admit = self._admissible()
        if admit:
            return "prefill", admit
        return "decode", len(self.running)

    def schedule(self) -> StepPlan:
        index = self.forward_ct
        admit = self._admissible()
        if admit:
            return self._plan_prefill(index, admit)
        return self._plan_decode(index)

    def commit(self, plan: StepPlan) -> list[int]:
        """Take a step's outcome: prefilled requests join, decoded ones advance, finished ones
        free their KV; then the iteration's arrivals. Returns the pool rows freed."""
        self.forward_ct += 1
        freed = []
        if plan.kind == "prefill":
            for item in plan.prefill:
                self.running.append(self._pending.pop(item.pool_idx))
        else:
            advance = plan.accept_lens or (1,) * plan.batch_size
            by_idx = {r.pool_idx: r for r in self.running}
            for idx, step in zip(plan.pool_indices, advance):
                req = by_idx[idx]
                req.seq_len += step
                req.remaining -= step
                req.decodes += 1
            for req in list(self.running):
                if req.remaining <= 0 or req.seq_len > self.max_len:
                    self._finish(req)
                    freed.append(req.pool_idx)
        for _ in range(self._poisson(self.cfg.arrival_rate)):
            self.waiting.append(self._draw_request())
        self._wait_for_work()
        return freed

    def lengths(self) -> dict[int, int]:
        """Committed length of every running request, by pool row."""
        return {r.pool_idx: r.seq_len for r in self.running}

    # ---- internals ------------------------------------------------------------------------
    def _admissible(self) -> int:
        """How many waiting requests the next prefill admits (0: none, decode instead)."""
        room = self.max_running - len(self.running)
        n, tokens = 0, 0
        for prompt, _ in self.waiting[:room]:
            if n and tokens + prompt > self.cfg.max_prefill_tokens:
                break
            n, tokens = n + 1, tokens + prompt
        return n

    def _plan_prefill(self, index: int, admit: int) -> StepPlan:
        self._pending = {}
        items = []
        for prompt, output in self.waiting[:admit]:
            idx = self.pool.alloc_req()
            self.pool.reserve(idx, prompt)
            self._pending[idx] = _Request(idx, prompt, output, allocated=prompt)
            items.append(PrefillItem(idx, 0, prompt))
        del self.waiting[:admit]
        return prefill_plan(index, items)

    def _plan_decode(self, index: int) -> StepPlan:
        if self.forward_ct % self.cfg.eviction_interval == 0:
            self._sweep_swa()
        for req in self.running:
            req.allocated = req.seq_len + self.width
            self.pool.reserve(req.pool_idx, req.allocated)
        return decode_plan(index, self.running, self._accept, self.rng)

    def _sweep_swa(self) -> None:
        """``maybe_evict_swa`` on a sweep iteration: every request that decoded before frees
        the SWA slots behind its window (pre_len: its committed length, upstream's seqlen - 1)."""
        for req in self.running:
            if req.decodes >= 1:
                evicted = self.pool.free_swa_out_of_window(
                    req.pool_idx, req.seq_len, req.swa_evicted
                )
                req.swa_evicted = evicted

    def _finish(self, req: _Request) -> None:
        self.running.remove(req)
        self.pool.release_kv(req.pool_idx, req.seq_len, req.allocated)
        self.finished_total += 1

    def _mid_flight(self) -> _Request:
        """A request that has decoded part of its output already (and held its SWA slots)."""
        prompt, output = self._draw_request()
        done = self.rng.randrange(output)
        seq_len = min(prompt + done, self.max_len)
        idx = self.pool.alloc_req()
        self.pool.reserve(idx, seq_len)
        return _Request(idx, seq_len, output - done, allocated=seq_len, decodes=1)

    def _draw_request(self) -> tuple[int, int]:
        return self._log_uniform(*self.cfg.prompt_len), self._log_uniform(*self.cfg.output_len)

    def _log_uniform(self, lo: int, hi: int) -> int:
        return min(hi, max(lo, round(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))))

    def _poisson(self, mean: float) -> int:
        """Arrivals in one iteration: exponential gaps until the iteration's end."""
        n, t = 0, self.rng.expovariate(mean)
        while t < 1.0:
            n, t = n + 1, t + self.rng.expovariate(mean)
        return n

    def _wait_for_work(self) -> None:
        """An empty server idles until a request arrives (no iteration runs meanwhile)."""
        if not self.running and not self.waiting:
            self.waiting.append(self._draw_request())
