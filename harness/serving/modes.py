"""Serving modes (registry): which forward passes a step runs and who produces the mirror.

- ``nonspec``: one DECODE pass per step (CUDA graph when it fits), periodic prefill; the host
  knows every length (mirror producer ``host_known``).
- ``eagle``: EAGLE with the overlap scheduler off: multi-step draft DECODE (graph), TARGET_VERIFY
  (graph), DRAFT_EXTEND (eager, as at 504570f4); the next step's mirror is a blocking copy.
- ``specv2``: the same passes with the overlap scheduler on: the mirror comes through the relay
  (private-stream pull, only when wanted).

Lengths per pass (conventions of ``harness.serving.batch``), for a request of committed length L:
draft DECODE L+1 (the token at position L, KV writes at L .. L+steps-1), TARGET_VERIFY L (draft
tokens at L .. L+D-1), DRAFT_EXTEND L+D (D tokens); prefill: prefix + extend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from harness.serving.batch import ForwardBatch, ForwardMode, host_to_device_async
from harness.serving.graph_runner import PassRecord, run_eager
from harness.serving.mirror import Mirror, MirrorRequest, get_mirror_producer
from harness.serving.scheduler import StepPlan
from harness.sync import region

if TYPE_CHECKING:
    from harness.serving.world import World

# A pass and the lengths the backend should have seen (the oracle's truth, host values).
Pass = tuple[PassRecord, Sequence[int]]


class ServingMode:
    name = "base"
    spec = False
    mirror_producer = "host_known"
    target_runner = "decode"  # the runner of the target model's decode-step forward

    def decode(self, world: World, plan: StepPlan) -> list[Pass]:  # pragma: no cover
        raise NotImplementedError

    def prefill(self, world: World, plan: StepPlan) -> list[Pass]:
        dev = world.device
        items = plan.prefill
        rows = [i.pool_idx for i in items]
        lens = [i.seq_len for i in items]
        ext = [i.extend_len for i in items]
        with region("scheduler/prepare"):
            rpi = host_to_device_async(rows, torch.int64, dev)
            seq_lens = host_to_device_async(lens, torch.int64, dev)
            slots = [
                s for i in items for s in world.pool.slots(i.pool_idx, i.prefix_len, i.seq_len)
            ]
            out = host_to_device_async(slots, torch.int64, dev)
            ext_dev = host_to_device_async(ext, torch.int32, dev)
        # The host knows prompt lengths: the mirror is free, attached when wanted.
        mirror = get_mirror_producer("host_known").produce(
            MirrorRequest(seq_lens, rows, host_lens=lens), world.want_host_mirror
        )
        passes = []
        for backend in world.prefill_backends():
            batch = ForwardBatch(
                ForwardMode.EXTEND,
                len(rows),
                seq_lens,
                rpi,
                out,
                mirror.seq_lens_cpu,
                mirror.seq_lens_sum,
                extend_seq_lens=ext_dev,
                extend_seq_lens_cpu=list(ext),
            )
            rec = run_eager(backend, batch, _prefill_forward(world, backend, batch))
            passes.append((rec, lens))
        self.after_admission_device(world, rpi, seq_lens)
        return passes

    def after_admission_device(self, world: World, rpi: torch.Tensor, lens: torch.Tensor) -> None:
        """Device side of an admission (the relay learns the lengths in speculative modes)."""


def _prefill_forward(world: World, backend, batch: ForwardBatch) -> Callable[[], None]:
    hook = getattr(backend, "sparse_prefill_workspace_len_d2h", None)

    def forward() -> None:
        # Sparse prefill sizes its workspace from a device value at forward time (one D2H).
        world.forward(None if hook is None else (lambda: hook(batch)))

    return forward


SERVING_MODES: dict[str, type[ServingMode]] = {}


def serving_mode(cls: type[ServingMode]) -> type[ServingMode]:
    SERVING_MODES[cls.name] = cls
    return cls


def get_serving_mode(name: str) -> ServingMode:
    try:
        return SERVING_MODES[name]()
    except KeyError:
        raise ValueError(f"unknown serving mode {name!r}; known: {sorted(SERVING_MODES)}") from None


@serving_mode
class NonSpec(ServingMode):
    name = "nonspec"

    def decode(self, world: World, plan: StepPlan) -> list[Pass]:
        dev = world.device
        rows = list(plan.pool_indices)
        new_lens = [n + 1 for n in plan.seq_lens]  # the host adds 1 per decode step
        with region("scheduler/prepare"):
            rpi = host_to_device_async(rows, torch.int64, dev)
            seq_lens = host_to_device_async(new_lens, torch.int64, dev)
            slots = [world.pool.slot(r, n) for r, n in zip(rows, plan.seq_lens)]
            out = host_to_device_async(slots, torch.int64, dev)
        mirror = world.producer.produce(
            MirrorRequest(seq_lens, rows, host_lens=new_lens), world.want_mirror
        )
        batch = ForwardBatch(
            ForwardMode.DECODE,
            len(rows),
            seq_lens,
            rpi,
            out,
            mirror.seq_lens_cpu,
            mirror.seq_lens_sum,
        )
        return [(world.runners["decode"].run(batch), new_lens)]


def _shift(mirror: Mirror, by: int, bs: int) -> Mirror:
    if mirror.seq_lens_cpu is None:
        return mirror
    return Mirror(mirror.seq_lens_cpu + by, mirror.seq_lens_sum + by * bs)  # host ops


@serving_mode
class Eagle(ServingMode):
    name = "eagle"
    spec = True
    mirror_producer = "blocking"
    target_runner = "verify"

    def decode(self, world: World, plan: StepPlan) -> list[Pass]:
        dev = world.device
        spec = world.spec
        d, steps = spec.draft_token_num, spec.num_steps
        rows = list(plan.pool_indices)
        lens = list(plan.seq_lens)  # oracle truth (the host of a real system lacks it)
        bs = len(rows)
        r2t = world.pool.req_to_token
        with region("scheduler/prepare"):
            rpi = host_to_device_async(rows, torch.int64, dev)
            seq_lens = world.relay.resolve_seq_lens(rpi)  # device truth, gathered on device
        mirror = world.producer.produce(
            MirrorRequest(seq_lens, rows, relay=world.relay), world.want_mirror
        )
        passes: list[Pass] = []
        with region("scheduler/prepare"):
            # Draft steps write KV at L .. L+steps-1 (request-major, topk 1).
            pos = seq_lens[:, None] + torch.arange(steps, dtype=torch.int64, device=dev)[None, :]
            draft_out = r2t[rpi[:, None], pos].to(torch.int64).reshape(-1)
            dm = _shift(mirror, 1, bs)
            draft = ForwardBatch(
                ForwardMode.DECODE, bs, seq_lens + 1, rpi, draft_out, dm.seq_lens_cpu, dm.seq_lens_sum,
                spec_info=spec,
            )  # fmt: skip
        passes.append((world.runners["draft"].run(draft), [n + 1 for n in lens]))
        with region("scheduler/prepare"):
            pos = seq_lens[:, None] + torch.arange(d, dtype=torch.int64, device=dev)[None, :]
            verify_out = r2t[rpi[:, None], pos].to(torch.int64).reshape(-1)
            verify = ForwardBatch(
                ForwardMode.TARGET_VERIFY, bs, seq_lens, rpi, verify_out, mirror.seq_lens_cpu,
                mirror.seq_lens_sum, spec_info=spec,
            )  # fmt: skip
        passes.append((world.runners["verify"].run(verify), lens))
        with region("scheduler/prepare"):
            # Stand-in for the verify's sampling result (accept lengths land on the device).
            accept = host_to_device_async(plan.accept_lens, torch.int64, dev)
            new_seq_lens = seq_lens + accept
            em = _shift(mirror, d, bs)
            extend = ForwardBatch(
                ForwardMode.DRAFT_EXTEND, bs, seq_lens + d, rpi, verify_out, em.seq_lens_cpu,
                em.seq_lens_sum, extend_seq_lens=torch.full((bs,), d, dtype=torch.int32, device=dev),
                extend_seq_lens_cpu=[d] * bs, spec_info=spec,
            )  # fmt: skip
        # Draft extend runs eagerly for this backend at 504570f4 (its graph came later).
        rec = run_eager(world.draft_extend_backend, extend, world.forward)
        passes.append((rec, [n + d for n in lens]))
        with region("scheduler/publish"):
            world.relay.publish(rpi, new_seq_lens)
        return passes

    def after_admission_device(self, world: World, rpi: torch.Tensor, lens: torch.Tensor) -> None:
        world.relay.publish(rpi, lens)


@serving_mode
class SpecV2(Eagle):
    name = "specv2"
    mirror_producer = "relay"
