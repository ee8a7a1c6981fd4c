"""One DP-attention rank's step: its serving world around the exchange of the step's record.

A step, as sglang 504570f4's scheduler loops run it (scheduler.py:1531-1626):

    step/scheduler/prepare           schedule the batch (get_next_batch_to_run)
    step/scheduler/prepare           this rank's record (and a planted sync, when there)
    step/scheduler/dp_exchange       all-gather the records, read back the decisions
                                     (with speculative decoding twice, below)
    (passes)                         the batch, or an IDLE batch when the rank has none
    step/scheduler/commit            the scheduler takes the step's outcome
    step/scheduler/process_result    wait for a batch's results (copy_done.synchronize())

With the overlap scheduler (the gloo exchange) the loop is exchange(N) -> launch N -> process
N-1 (scheduler.py:1585-1612): the wait is on the previous step's copy-done event
(batch_result_processor.py:634-635; idle batches too, l.622-623), so the GPU has step N queued
while the host waits for N-1. A rank held up by a sync of its own reaches the next exchange
late, and every other rank waits for it there. Without overlap (the NCCL exchange's default
route) a step processes its own results before the next exchange (scheduler.py:1531-1558).

With speculative decoding, unless ``--speculative-skip-dp-mlp-sync``, the ranks first exchange
the record of their new prefill batch (scheduler.py 2684-2695), so that prefill and decode
batches are never mixed, and, when no rank has one, exchange again with the decode batch
(l.2712). The ranks modelled with speculation only decode: every step makes both exchanges.
"""

from __future__ import annotations

from typing import Any

from harness.batch.info import ForwardMode
from harness.dp.exchange import MLPSyncExchange
from harness.dp.inject import Injection
from harness.dp.record import local_record
from harness.serving.scheduler import StepPlan
from harness.serving.world import StepInfo, World
from syncledger import region, tags

_MODES = {"decode": ForwardMode.DECODE, "prefill": ForwardMode.EXTEND}


class DPWorld:
    """A rank's serving world driven in lockstep with the other ranks (the runner's World)."""

    def __init__(
        self,
        world: World,
        exchange: MLPSyncExchange,
        injection: Injection | None = None,
        skip_spec_sync: bool = False,
    ) -> None:
        self.world = world
        self.exchange = exchange
        self.injection = injection
        self.overlap = exchange.backend.overlap
        # the exchange of the new prefill batch before the decode batch's (speculation only)
        self.prefill_exchange = world.spec is not None and not skip_spec_sync

    @property
    def findings(self) -> list[Any]:
        return self.world.findings

    @property
    def decode_mirror(self) -> str:
        return self.world.decode_mirror

    def warmup_and_capture(self) -> None:
        """The world's warm-up and capture, then one exchange, which sets up the collective's
        connections (NCCL builds its communicator on the first call)."""
        self.world.warmup_and_capture()
        with tags(path="warmup"), region("step", "scheduler", "dp_exchange"):
            self.exchange.all_gather_may_d2h(
                local_record(None, 0, 0, self.world.cfg.serving.cuda_graph)
            )

    def step(self) -> StepInfo:
        world = self.world
        kind, size = world.scheduler.peek()
        mode = None if kind == "decode" and size == 0 else _MODES[kind]
        step_mode = (mode or ForwardMode.IDLE).name
        with world.stepping() as n, tags(forward_mode=step_mode), region("step"):
            plan = None if mode is None else world.plan_step()
            with region("scheduler", "prepare"):
                record = local_record(mode, *_tokens(plan), world.cfg.serving.cuda_graph)
                self._inject("step/scheduler/prepare")
            with region("scheduler", "dp_exchange"):
                if self.prefill_exchange:  # no rank has a new prefill batch (decode only)
                    no_batch = local_record(None, 0, 0, world.cfg.serving.cuda_graph)
                    self.exchange.all_gather_may_d2h(no_batch)
                gathered = self.exchange.all_gather_may_d2h(record)
            info = gathered.global_info()
            if plan is not None:
                passes = world.run_plan(plan, info)
            elif gathered.need_idle_batch:
                passes = world.run_idle(info)
            else:  # no rank has work: nobody runs a batch (dp_attn.py:237)
                passes = []
            self._process_results(launched=bool(passes))
        return world.step_info(n, plan.kind if plan is not None else "idle", passes)

    def _process_results(self, launched: bool) -> None:
        """The world's result read-back, in the loop of this rank's exchange: the previous
        step's results with overlap, else this step's."""
        self.world.process_results(
            launched, self.overlap, lambda: self._inject("step/scheduler/process_result")
        )

    def _inject(self, region_path: str) -> None:
        if self.injection is not None:
            self.injection.at(region_path)


def _tokens(plan: StepPlan | None) -> tuple[int, int]:
    """(num_tokens, requests) of the rank's batch: requests for decode, extend tokens for
    prefill (dp_attn.py:156-175)."""
    if plan is None:
        return 0, 0
    if plan.kind == "prefill":
        return sum(item.extend_len for item in plan.prefill), plan.batch_size
    return plan.batch_size, plan.batch_size
