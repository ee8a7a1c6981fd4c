"""The world the benchmark runner drives: scheduler, pools, backends, mirror, graph runners.

world = build_world(WorldConfig(...), device)
world.warmup_and_capture()   # calibrate the stand-in forward, capture graphs (tags warmup/capture)
info = world.step()          # one scheduler iteration under region("step"), set_step(n)
world.findings               # stale_mirror findings
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import torch

from harness.backend import BackendConfig, DeepseekV4AttnBackend, MultiStepDraftBackend
from harness.batch.info import DPGlobalInfo, ForwardMode, SpecInfo, host_to_device_async
from harness.batch.pool import PoolConfig, ReqToTokenPool
from harness.serving.accept import AcceptConfig
from harness.serving.buckets import DEFAULT_MAX_BS, capture_buckets
from harness.serving.findings import Finding, check_stale_mirror
from harness.serving.graph_runner import GraphRunner
from harness.serving.mirror import LengthRelay
from harness.serving.modes import Pass, get_serving_mode, idle_pass
from harness.serving.scheduler import Scheduler, SchedulerConfig, StepPlan
from harness.serving.section import ServingConfig, SpecConfig
from harness.serving.stack import ServingStack
from harness.serving.standin import StandInForward
from syncledger import current_step, is_emulated, region, set_step, tags


@dataclass(frozen=True)
class WorldConfig:
    """One serving world: the scenario's `serving` section (every setting and its default,
    validated there), one cell of its sweeps (variant, mirror setting, batch size) and the seed
    of its requests.

    Beyond the scenario (their defaults keep it): the accept-length distribution, which
    buckets to capture ("near": those a run of batch_size replays; "all": upstream's full
    list; or a tuple) and arrivals' prompt lengths."""

    serving: ServingConfig
    variant: str
    mirror: str
    batch_size: int
    seed: int
    accept_dist: str = "geometric"
    capture: str | tuple[int, ...] = "near"
    prompt_len: tuple[int, int] = (32, 256)

    @property
    def spec(self) -> SpecInfo | None:
        s = self.serving.spec
        return None if s is None else SpecInfo(s.draft_tokens, s.steps, s.topk)

    @property
    def capture_bs(self) -> list[int]:
        max_bs = self.serving.cuda_graph_max_bs or DEFAULT_MAX_BS
        return capture_buckets(self.spec is not None, max_bs, self.batch_size, self.capture)


class StepScheduler(Protocol):
    """What the world asks of its scheduler (harness.serving.scheduler's, or another world's
    that changes the batch its own way)."""

    def peek(self) -> tuple[str, int]: ...
    def schedule(self) -> StepPlan: ...
    def commit(self, plan: StepPlan) -> list[int]: ...
    def lengths(self) -> dict[int, int]: ...


SchedulerFactory = Callable[["WorldConfig", ReqToTokenPool], StepScheduler]


def fixed_batch_scheduler(cfg: WorldConfig, pool: ReqToTokenPool) -> Scheduler:
    """The serving world's own: a batch of ``batch_size`` requests, each finished one
    replaced (harness.serving.scheduler)."""
    serving = cfg.serving
    return Scheduler(
        SchedulerConfig(
            batch_size=cfg.batch_size,
            context_len=serving.context_len,
            seed=cfg.seed,
            prefill_every=serving.prefill_every,
            spec=cfg.spec,
            accept=accept_config(cfg),
            prompt_len=cfg.prompt_len,
        ),
        pool,
    )


@dataclass(frozen=True)
class ForwardPass:
    forward_mode: str
    path: str  # "graph" | "eager"
    batch_size: int
    bucket: int | None  # padded (captured) batch size on the graph path


@dataclass(frozen=True)
class StepInfo:
    step: int
    kind: str  # "decode" | "prefill" | "idle" (DP attention: a rank with no requests)
    passes: tuple[ForwardPass, ...] = field(default=())

    @property
    def batch_size(self) -> int:
        return max((p.batch_size for p in self.passes), default=0)


class World:
    def __init__(
        self,
        cfg: WorldConfig,
        device: torch.device,
        scheduler: SchedulerFactory = fixed_batch_scheduler,
    ):
        self.cfg = cfg
        self.device = device
        serving = cfg.serving
        self.mode = get_serving_mode(serving.serving_mode)
        self.spec = spec = cfg.spec
        draft_slots = max(8, spec.draft_token_num if spec else 1)
        self.pool = ReqToTokenPool(
            PoolConfig(
                # a row per request, and as many as the largest captured bucket pads to (a
                # DP-attention rank replays the bucket of the largest rank's batch)
                max_reqs=max(cfg.batch_size, *cfg.capture_bs) + 1,
                context_len=serving.context_len,
                draft_slots=draft_slots,
                seed=cfg.seed,
            ),
            device,
        )
        self.scheduler = scheduler(cfg, self.pool)
        bcfg = BackendConfig(
            model=serving.model,
            variant=cfg.variant,
            prep_in_graph=serving.prep_in_graph,
            spec=spec,
            kernels=serving.kernels,
        )
        self.target_backend = DeepseekV4AttnBackend(bcfg, self.pool, device, cfg.variant)
        self.draft_backend = None
        self.draft_extend_backend = None
        backends: list = [self.target_backend]
        if spec is not None:
            self.draft_backend = MultiStepDraftBackend(
                spec.num_steps, bcfg, self.pool, device, cfg.variant, topk=spec.topk
            )
            self.draft_extend_backend = DeepseekV4AttnBackend(bcfg, self.pool, device, cfg.variant)
            backends += [self.draft_backend, self.draft_extend_backend]
        # As upstream's decide_needs_cpu_seq_lens: an OR over every attention backend.
        self.needs_cpu_seq_lens = any(b.needs_cpu_seq_lens for b in backends)
        # The relay's switch (spec-v2): the flag, unless a what-if forces it.
        forced = {"present": True, "absent": False}
        self.relay = LengthRelay(self.pool.cfg.max_reqs, device) if spec is not None else None
        self.standin = StandInForward(serving.forward_us, device)
        self.runners = self._make_runners()
        # what the serving mode drives (it sees nothing else of the world)
        self.stack = ServingStack(
            device=device,
            pool=self.pool,
            spec=spec,
            target_backend=self.target_backend,
            draft_extend_backend=self.draft_extend_backend,
            relay=self.relay,
            forward=self.forward,
            mirror=cfg.mirror,
            relay_wants_mirror=forced.get(cfg.mirror, self.needs_cpu_seq_lens),
            runners=self.runners,
        )
        self._copy_done: torch.cuda.Event | None = None  # launched, its results not yet waited
        self._findings: list[Finding] = []
        self._pending: list[tuple] = []  # (step, pass record, truth) awaiting the stale check
        self.step_count = 0
        self._ready = False
        if self.relay is not None:  # requests running at start: the device knows their lengths
            lens = self.scheduler.lengths()
            self._publish(list(lens), list(lens.values()))
            self.stack.host_lens.update(lens)

    # ---- setup ----------------------------------------------------------------------------
    def _make_runners(self) -> dict[str, GraphRunner]:
        cfg, spec = self.cfg, self.spec
        buckets = cfg.capture_bs
        common = dict(device=self.device, forward=self.forward, use_graphs=cfg.serving.cuda_graph)
        if spec is None:
            return {
                "decode": GraphRunner(
                    "decode", self.target_backend, ForwardMode.DECODE, buckets, 1, **common
                )
            }
        runners = {
            "draft": GraphRunner(
                "draft", self.draft_backend, ForwardMode.DECODE, buckets,
                spec.topk * spec.num_steps, spec=spec, mirror_when_absent="none", **common,
            ),
            "verify": GraphRunner(
                "verify", self.target_backend, ForwardMode.TARGET_VERIFY, buckets,
                spec.draft_token_num, spec=spec, **common,
            ),
        }  # fmt: skip
        if self.draft_extend_backend.policy.draft_extend_graph:
            runners["draft_extend"] = GraphRunner(
                "draft_extend", self.draft_extend_backend, ForwardMode.DRAFT_EXTEND, buckets,
                spec.draft_token_num, spec=spec, **common,
            )  # fmt: skip
        return runners

    def forward(self, at_forward=None) -> None:
        self.standin(at_forward)

    def warmup_and_capture(self) -> None:
        """Calibrate the stand-in forward and capture every runner's graphs (not measured)."""
        with tags(path="warmup"):
            self.standin.prepare()
        if self.cfg.serving.cuda_graph:
            for runner in self.runners.values():
                runner.capture()
        # drained once on every device (the emulated synchronize is recorded too), so that
        # set-up counts are the same on CUDA and on the emulated device
        if self.device.type == "cuda" or is_emulated(self.device):
            torch.cuda.synchronize(self.device if self.device.type == "cuda" else None)
        self._ready = True

    @property
    def decode_mirror(self) -> str:
        """'present' / 'absent': whether decode batches carry the host mirror."""
        return "present" if self.mode.wants_decode_mirror(self.stack) else "absent"

    # ---- one step -------------------------------------------------------------------------
    def step(self) -> StepInfo:
        """One scheduler iteration: plan, run the passes, commit."""
        kind, bs = self.scheduler.peek()
        # Step-level work (scheduling, the mirror, publish) carries the scheduler batch's mode
        # (DECODE, or EXTEND for prefill; EAGLE's draft/verify/extend run inside a DECODE
        # step upstream) and the path of the target model's forward; passes override both.
        step_mode = "EXTEND" if kind == "prefill" else "DECODE"
        step_path = "eager" if kind == "prefill" else self._decode_path(bs)
        with self.stepping() as n, tags(forward_mode=step_mode, path=step_path), region("step"):
            plan = self.plan_step()
            passes = self.run_plan(plan)
            self.process_results(launched=True)
        return self.step_info(n, plan.kind, passes)

    # The pieces of a step, for callers that put work between them (DP attention exchanges
    # the step's record between planning and the passes).
    @contextmanager
    def stepping(self) -> Iterator[int]:
        """Number the step and tag what happens inside with it; yields the step number."""
        if not self._ready:
            raise RuntimeError("call warmup_and_capture() before step()")
        n = self.step_count
        self.step_count += 1
        outer_step = current_step()
        set_step(n)
        try:
            yield n
        finally:
            set_step(outer_step)

    def plan_step(self) -> StepPlan:
        """Schedule the step (region ``scheduler/prepare``); with speculative decoding the
        lengths of requests that joined with their KV are published to the relay."""
        with region("scheduler", "prepare"):
            plan = self.scheduler.schedule()
            if plan.admitted_direct and self.relay is not None:
                rows, lens = zip(*plan.admitted_direct)
                self._publish(rows, lens)
                self.stack.host_lens.update(plan.admitted_direct)
        return plan

    def run_plan(self, plan: StepPlan, dp: DPGlobalInfo | None = None) -> list[Pass]:
        """The step's forward passes, then the commit. ``dp``: what the DP-attention ranks
        decided together for this step; every batch of the step carries it."""
        if plan.kind == "prefill":
            passes = self.mode.prefill(self.stack, plan, dp)
        else:
            passes = self.mode.decode(self.stack, plan, dp)
        with region("scheduler", "commit"):
            self.scheduler.commit(plan)
        return passes

    def process_results(
        self,
        launched: bool,
        overlap: bool | None = None,
        before_wait: Callable[[], None] | None = None,
    ) -> None:
        """Record this step's copy-done event (managers/utils.py 144) and wait for the results
        the scheduler loop processes now (batch_result_processor.py 187 prefill, 635 decode,
        623 idle): the previous step's with the overlap scheduler, else this step's.
        ``overlap``: the loop's (DP attention: its exchange's), default the serving mode's;
        ``before_wait``: work in the region before the wait (DP attention's planted sync).
        The direct mode has no scheduler: nothing is processed."""
        overlap = self.mode.traits.overlap if overlap is None else overlap
        if overlap is None or not (self.device.type == "cuda" or is_emulated(self.device)):
            return
        done = None
        if launched:
            done = torch.cuda.Event()
            done.record()
        waiting, self._copy_done = (self._copy_done, done) if overlap else (done, None)
        with region("scheduler", "process_result"):
            if before_wait is not None:
                before_wait()
            if waiting is not None:
                waiting.synchronize()  # fidelity: R01

    def run_idle(self, dp: DPGlobalInfo) -> list[Pass]:
        """DP attention: this rank has no requests but another has, so it runs an IDLE batch."""
        return idle_pass(self.stack, dp)

    def step_info(self, n: int, kind: str, passes: list[Pass]) -> StepInfo:
        """The step's record; its passes wait for the stale-mirror check."""
        # Stale-mirror checks run when findings are read, so they add no host time to a step;
        # host lengths a backend never reads (a9cf5e68 unless it needs them) are no hazard.
        if self.target_backend.reads_runner_mirror:
            self._pending.extend(
                (n, rec, truth) for rec, truth in passes if rec.host_lens_used is not None
            )
        out = [ForwardPass(r.forward_mode, r.path, r.batch_size, r.bucket) for r, _ in passes]
        return StepInfo(n, kind, tuple(out))

    @property
    def findings(self) -> list[Finding]:
        """Correctness hazards seen so far (``stale_mirror``), in step order."""
        for n, rec, truth in self._pending:
            finding = check_stale_mirror(
                rec.host_lens_used, truth, step=n, forward_mode=rec.forward_mode, path=rec.path
            )
            if finding is not None:
                self._findings.append(finding)
        self._pending.clear()
        return self._findings

    def _decode_path(self, batch_size: int) -> str:
        # the target model's decode-step forward: verify with speculation, else decode
        runner = self.runners["verify" if self.spec is not None else "decode"]
        return "graph" if runner.graphs and batch_size <= runner.max_bs else "eager"

    def _publish(self, rows, lens) -> None:
        rpi = host_to_device_async(list(rows), torch.int64, self.device)
        val = host_to_device_async(list(lens), torch.int64, self.device)
        self.relay.publish(rpi, val)


def _accept_mean(serving: ServingConfig) -> float:
    """Accept lengths are drawn with speculative decoding only; without it any mean does."""
    return (serving.spec or SpecConfig()).accept_mean


def accept_config(cfg: WorldConfig) -> AcceptConfig:
    """The accept-length distribution of a world's verifies."""
    return AcceptConfig(_accept_mean(cfg.serving), cfg.accept_dist)


def build_world(
    cfg: WorldConfig, device: torch.device, scheduler: SchedulerFactory = fixed_batch_scheduler
) -> World:
    return World(cfg, device, scheduler)
