"""Serving modes (registry): which forward passes a step runs and where the mirror comes from.

- ``nonspec``: one DECODE pass per step (CUDA graph when it fits), periodic prefill; the host
  knows every length, so every batch carries the mirror.
- ``eagle``: EAGLE with the overlap scheduler off: multi-step draft DECODE (graph),
  TARGET_VERIFY (graph), DRAFT_EXTEND; after every step, decode and prefill, the scheduler
  copies the new lengths to the host with a blocking ``.to("cpu")``.
- ``specv2``: the same passes with the overlap scheduler on: a decode batch's mirror comes
  through the relay, only when the backends want it (``needs_cpu_seq_lens``).
- ``direct``: the backend driven directly, without scheduler or speculative worker (as
  upstream's attention unit tests do): every batch carries the mirror, or none (a what-if
  that keeps `after`'s backend-level fallbacks measurable).

The speculative worker's own host work is modelled in the speculative serving modes: the two
small pageable copies of ``eagle_prepare_for_decode`` (S06), the two of a draft-extend batch
built from host lists (S07, skipped on the GPU-only path when the batch has no mirror), the two
of the draft model's prefill batch (S08), and the
tree-mask sizing that reads ``attn_backend.max_context_len`` when the batch has no
``seq_lens_sum`` (S04).

Lengths per pass (conventions of ``harness.batch.info``), for a request of committed length L:
draft DECODE L+1 (the token at position L, KV writes at L .. L+steps-1), TARGET_VERIFY L (draft
tokens at L .. L+D-1), DRAFT_EXTEND L+D (D tokens); prefill: prefix + extend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from harness.batch.info import (
    DPGlobalInfo,
    ForwardBatch,
    ForwardMode,
    extend_start_loc_of,
    host_to_device_async,
    pageable_to_device_nonblocking,
)
from harness.serving.graph_runner import PassRecord, run_eager
from harness.serving.mirror import Mirror, blocking_copy_d2h, host_known_mirror
from harness.serving.mode_traits import ModeTraits, traits_of
from harness.serving.scheduler import StepPlan
from harness.serving.stack import ServingStack
from syncledger import region

# A pass and the lengths the backend should have seen (the oracle's truth, host values).
Pass = tuple[PassRecord, Sequence[int]]


class ServingMode:
    """A step's passes over the serving stack (never the world around it). ``dp``: what the
    DP-attention ranks decided together for the step (None with one rank); every batch of the
    step carries it."""

    traits: ModeTraits  # set by @serving_mode from the declared modes (mode_traits.MODES)

    def decode(
        self, stack: ServingStack, plan: StepPlan, dp: DPGlobalInfo | None
    ) -> list[Pass]:  # pragma: no cover
        raise NotImplementedError

    # ---- the mirror ----------------------------------------------------------------------
    def decode_mirror(
        self, stack: ServingStack, rows: Sequence[int], lens: Sequence[int], seq_lens: torch.Tensor
    ) -> Mirror:  # pragma: no cover
        """The mirror of a decode batch: ``lens`` are the lengths the scheduler knows (the
        simulator's truth), ``seq_lens`` the batch's device lengths."""
        raise NotImplementedError

    def wants_decode_mirror(self, stack: ServingStack) -> bool:
        """Does a decode batch carry the mirror?"""
        return True

    def prefill_mirror(self, stack: ServingStack, lens: Sequence[int]) -> Mirror:
        return host_known_mirror(lens)

    def end_of_step(
        self, stack: ServingStack, rows: Sequence[int], new_seq_lens: torch.Tensor
    ) -> None:
        """Host work after a step's forward passes (the overlap-off mirror copy)."""

    # ---- prefill -------------------------------------------------------------------------
    def prefill(self, stack: ServingStack, plan: StepPlan, dp: DPGlobalInfo | None) -> list[Pass]:
        dev = stack.device
        items = plan.prefill
        rows = [i.pool_idx for i in items]
        lens = [i.seq_len for i in items]
        ext = [i.extend_len for i in items]
        with region("scheduler", "prepare"):
            rpi = host_to_device_async(rows, torch.int64, dev)
            seq_lens = host_to_device_async(lens, torch.int64, dev)
            slots = [
                s for i in items for s in stack.pool.slots(i.pool_idx, i.prefix_len, i.seq_len)
            ]
            out = host_to_device_async(slots, torch.int64, dev)
        mirror = self.prefill_mirror(stack, lens)
        prefix = [i.prefix_len for i in items]
        passes = []
        for n, backend in enumerate(stack.prefill_backends()):
            ext_dev = self._prefill_extend_lens(stack, prefix, ext, dp, draft=n > 0)
            start = extend_start_loc_of(ext_dev)
            batch = ForwardBatch(
                ForwardMode.EXTEND, len(rows), seq_lens, rpi, out, mirror.seq_lens_cpu,
                mirror.seq_lens_sum, extend_seq_lens=ext_dev, extend_seq_lens_cpu=list(ext),
                extend_start_loc=start, dp=dp,
            )  # fmt: skip
            rec = run_eager(backend, batch, _prefill_forward(stack, backend, batch))
            passes.append((rec, lens))
        if stack.relay is not None:
            with region("scheduler", "publish"):
                stack.relay.publish(rpi, seq_lens)
        self.end_of_step(stack, rows, seq_lens)
        return passes

    def _prefill_extend_lens(
        self,
        stack: ServingStack,
        prefix: list[int],
        ext: list[int],
        dp: DPGlobalInfo | None,
        *,
        draft: bool,
    ) -> torch.Tensor:
        """A prefill forward batch's extend lengths on the device. In the serving stack each
        forward batch comes from its own ``ForwardBatch.init_new`` of the scheduler's host
        lists (S07, and D01 with DP attention): the target model's, then with EAGLE the draft
        model's (eagle_worker_v2.py 814, S08)."""
        dev = stack.device
        if not self.traits.serving_stack:
            with region("scheduler", "prepare"):
                return host_to_device_async(ext, torch.int32, dev)
        if draft:
            with region("worker", "prepare"):
                dp_tokens_to_device(dp, dev)
                return extend_lists_to_device(prefix, ext, dev)  # fidelity: S08
        with region("scheduler", "prepare"):
            dp_tokens_to_device(dp, dev)
            return extend_lists_to_device(prefix, ext, dev)


def _prefill_forward(stack: ServingStack, backend, batch: ForwardBatch) -> Callable[[], None]:
    def forward() -> None:
        # Sparse prefill sizes its workspace from a device value at forward time (one D2H).
        stack.forward(lambda: backend.sparse_prefill_workspace_len_d2h(batch))

    return forward


SERVING_MODES: dict[str, type[ServingMode]] = {}


def serving_mode(name: str) -> Callable[[type[ServingMode]], type[ServingMode]]:
    """Implement the declared serving mode `name` (harness.serving.mode_traits)."""

    def register(cls: type[ServingMode]) -> type[ServingMode]:
        if name in SERVING_MODES:
            raise ValueError(f"serving mode {name!r} implemented twice")
        cls.traits = traits_of(name)
        SERVING_MODES[name] = cls
        return cls

    return register


def get_serving_mode(name: str) -> ServingMode:
    traits_of(name)  # ValueError naming the known ones
    return SERVING_MODES[name]()


def decode_one_pass(
    mode: ServingMode, stack: ServingStack, plan: StepPlan, dp: DPGlobalInfo | None
) -> list[Pass]:
    """A step of one DECODE pass per request (no speculative decoding)."""
    dev = stack.device
    rows = list(plan.pool_indices)
    new_lens = [n + 1 for n in plan.seq_lens]  # the host adds 1 per decode step
    with region("scheduler", "prepare"):
        rpi = host_to_device_async(rows, torch.int64, dev)
        seq_lens = host_to_device_async(new_lens, torch.int64, dev)
        slots = [stack.pool.slot(r, n) for r, n in zip(rows, plan.seq_lens)]
        out = host_to_device_async(slots, torch.int64, dev)
        dp_tokens_to_device(dp, dev)
    mirror = mode.decode_mirror(stack, rows, new_lens, seq_lens)
    batch = ForwardBatch(
        ForwardMode.DECODE, len(rows), seq_lens, rpi, out, mirror.seq_lens_cpu,
        mirror.seq_lens_sum, dp=dp,
    )  # fmt: skip
    return [(stack.runners["decode"].run(batch), new_lens)]


def idle_pass(stack: ServingStack, dp: DPGlobalInfo) -> list[Pass]:
    """DP attention's IDLE batch: a rank with no requests runs an empty batch while another rank
    has work, so that it takes part in the step's collectives (dp_attn.py:237-245; an idle
    batch holds empty tensors, schedule_batch.py:2630-2644). The decode runner replays it,
    padded to the bucket of the largest batch across ranks, when every rank runs graphs, and
    runs it eagerly otherwise. Modelled without speculative decoding."""
    dev = stack.device
    with region("scheduler", "prepare"):
        empty = [torch.empty(0, dtype=torch.int64, device=dev) for _ in range(3)]
        dp_tokens_to_device(dp, dev)
    mirror = host_known_mirror([])
    batch = ForwardBatch(
        ForwardMode.IDLE, 0, *empty, mirror.seq_lens_cpu, mirror.seq_lens_sum, dp=dp
    )
    return [(stack.runners["decode"].run(batch), [])]


@serving_mode("nonspec")
class NonSpec(ServingMode):
    def decode(self, stack: ServingStack, plan: StepPlan, dp: DPGlobalInfo | None) -> list[Pass]:
        return decode_one_pass(self, stack, plan, dp)

    def decode_mirror(self, stack: ServingStack, rows, lens, seq_lens) -> Mirror:
        return host_known_mirror(lens)


@serving_mode("eagle")
class Eagle(ServingMode):
    """EAGLE with the overlap scheduler off (the spec-v2 worker runs either way)."""

    def decode(self, stack: ServingStack, plan: StepPlan, dp: DPGlobalInfo | None) -> list[Pass]:
        rows = list(plan.pool_indices)
        lens = list(plan.seq_lens)  # oracle truth (the host of a real system lacks it)
        with region("scheduler", "prepare"):
            rpi = host_to_device_async(rows, torch.int64, stack.device)
            if self.traits.serving_stack:
                eagle_prepare_for_decode(stack, lens)
            seq_lens = stack.relay.resolve_seq_lens(rpi)  # device truth, gathered on device
        mirror = self.decode_mirror(stack, rows, lens, seq_lens)
        passes = [self._draft(stack, rpi, seq_lens, mirror, lens, dp)]
        verify_pass, verify_out = self._verify(stack, rpi, seq_lens, mirror, lens, dp)
        passes.append(verify_pass)
        with region("scheduler", "prepare"):
            # Stand-in for the verify's sampling result (accept lengths land on the device).
            accept = host_to_device_async(plan.accept_lens, torch.int64, stack.device)
            new_seq_lens = seq_lens + accept
        with region("scheduler", "publish"):
            stack.relay.publish(rpi, new_seq_lens)  # on_publish, before the draft extend
        passes.append(self._draft_extend(stack, rpi, seq_lens, verify_out, mirror, lens, dp))
        self.end_of_step(stack, rows, new_seq_lens)
        return passes

    # ---- the mirror ----------------------------------------------------------------------
    def decode_mirror(self, stack: ServingStack, rows, lens, seq_lens) -> Mirror:
        """The lengths the last blocking copies brought to the host, gathered for this batch's
        rows on the host (as the scheduler filters and merges its batches)."""
        with region("scheduler", "mirror"):
            return Mirror.of_host([stack.host_lens[r] for r in rows])

    def end_of_step(
        self, stack: ServingStack, rows: Sequence[int], new_seq_lens: torch.Tensor
    ) -> None:
        stack.host_lens.update(zip(rows, blocking_copy_d2h(new_seq_lens)))

    # ---- the passes ----------------------------------------------------------------------
    # Under DP attention every batch of the step carries what the ranks decided (``dp``).
    def _draft(self, stack: ServingStack, rpi, seq_lens, mirror: Mirror, lens, dp) -> Pass:
        spec, bs = stack.spec, int(rpi.shape[0])
        with region("scheduler", "prepare"):
            # Draft steps write KV at L .. L+steps-1 (request-major, topk 1).
            out = _slots(stack, rpi, seq_lens, spec.num_steps)
            dm = mirror.shifted(1)
            draft = ForwardBatch(
                ForwardMode.DECODE, bs, seq_lens + 1, rpi, out, dm.seq_lens_cpu, dm.seq_lens_sum,
                spec_info=spec, dp=dp,
            )  # fmt: skip
        rec = stack.runners["draft"].run(draft)
        if self.traits.serving_stack and draft.seq_lens_sum is None:
            size_tree_mask_from_backend(stack)
        return rec, [n + 1 for n in lens]

    def _verify(
        self, stack: ServingStack, rpi, seq_lens, mirror: Mirror, lens, dp
    ) -> tuple[Pass, torch.Tensor]:
        spec, bs = stack.spec, int(rpi.shape[0])
        with region("scheduler", "prepare"):
            out = _slots(stack, rpi, seq_lens, spec.draft_token_num)
            verify = ForwardBatch(
                ForwardMode.TARGET_VERIFY, bs, seq_lens, rpi, out, mirror.seq_lens_cpu,
                mirror.seq_lens_sum, spec_info=spec, dp=dp,
            )  # fmt: skip
        return (stack.runners["verify"].run(verify), lens), out

    def _draft_extend(
        self, stack: ServingStack, rpi, seq_lens, out, mirror: Mirror, lens, dp
    ) -> Pass:
        d = stack.spec.draft_token_num
        with region("worker", "prepare"):
            batch = draft_extend_batch(
                stack, rpi, seq_lens, out, mirror, host_lists=self.traits.serving_stack
            )
            batch.dp = dp
        runner = stack.runners.get("draft_extend")
        rec = (
            runner.run(batch)
            if runner
            else run_eager(stack.draft_extend_backend, batch, stack.forward)
        )
        return rec, [n + d for n in lens]


def _slots(stack: ServingStack, rpi: torch.Tensor, seq_lens: torch.Tensor, n: int) -> torch.Tensor:
    """KV slots of positions L .. L+n-1 of each request (request-major), gathered on device."""
    pos = seq_lens[:, None] + torch.arange(n, dtype=torch.int64, device=stack.device)[None, :]
    return stack.pool.req_to_token[rpi[:, None], pos].to(torch.int64).reshape(-1)


def eagle_prepare_for_decode(stack: ServingStack, lens: Sequence[int]) -> None:
    """``eagle_prepare_for_decode`` moves two host lists of KV lengths (int32, one per
    request: allocated now, allocated after this step) to the device from pageable memory,
    non-blocking (S06)."""
    cur = list(lens)
    nxt = [n + stack.spec.draft_token_num for n in cur]
    dev = stack.device
    pageable_to_device_nonblocking(cur, torch.int32, dev)  # fidelity: S06
    pageable_to_device_nonblocking(nxt, torch.int32, dev)


def dp_tokens_to_device(dp: DPGlobalInfo | None, dev: torch.device) -> None:
    """``ForwardBatch.init_new`` of a DP-attention batch moves every rank's token counts, and
    those that want logprobs, to the device from pageable lists, non-blocking (D01); IDLE
    batches too (forward_batch_info.py 787-794 run before the IDLE return)."""
    if dp is None:
        return
    pageable_to_device_nonblocking(dp.global_num_tokens, torch.int64, dev)  # fidelity: D01
    pageable_to_device_nonblocking(dp.num_tokens_for_logprob, torch.int64, dev)


def extend_lists_to_device(
    prefix_lens: Sequence[int], extend_lens: Sequence[int], dev: torch.device
) -> torch.Tensor:
    """``ForwardBatch.init_new`` of an extend-like batch built from host lists: extend and
    prefix lengths (int32, one per request) go to the device from pageable memory,
    non-blocking (S07). Returns the extend lengths on the device."""
    ext = pageable_to_device_nonblocking(extend_lens, torch.int32, dev)  # fidelity: S07
    pageable_to_device_nonblocking(prefix_lens, torch.int32, dev)
    return ext


def size_tree_mask_from_backend(stack: ServingStack) -> int:
    """The draft worker sizes the verify tree mask from ``attn_backend.max_context_len`` when
    the batch has no ``seq_lens_sum`` and the backend preallocates no tree-mask buffer
    (DeepSeek-V4 has none). Before a9cf5e68 the backend has no such attribute (S04)."""
    with region("worker", "draft"):
        return stack.target_backend.max_context_len  # fidelity: S04


def draft_extend_batch(
    stack: ServingStack,
    rpi: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor,
    mirror: Mirror,
    *,
    host_lists: bool,
) -> ForwardBatch:
    """The draft-extend batch after verify: D tokens per request. With the mirror the worker
    passes host lists, which become two pageable non-blocking copies (S07); without it, the
    GPU-only path keeps every length on the device."""
    bs, d, dev = int(rpi.shape[0]), stack.spec.draft_token_num, stack.device
    if host_lists and mirror.seq_lens_cpu is not None:
        ext = extend_lists_to_device(mirror.seq_lens_cpu.tolist(), [d] * bs, dev)
    else:
        ext = torch.full((bs,), d, dtype=torch.int32, device=dev)
    em = mirror.shifted(d)
    return ForwardBatch(
        ForwardMode.DRAFT_EXTEND, bs, seq_lens + d, rpi, out, em.seq_lens_cpu, em.seq_lens_sum,
        extend_seq_lens=ext, extend_seq_lens_cpu=[d] * bs, extend_start_loc=extend_start_loc_of(ext),
        spec_info=stack.spec,
    )  # fmt: skip


@serving_mode("specv2")
class SpecV2(Eagle):
    """EAGLE with the overlap scheduler on: the relay, only for decode batches, only when
    wanted (``mirror: auto`` = the backends' flag; ``present`` / ``absent`` force it)."""

    def wants_decode_mirror(self, stack: ServingStack) -> bool:
        return stack.relay_wants_mirror

    def decode_mirror(self, stack: ServingStack, rows, lens, seq_lens) -> Mirror:
        if not stack.relay_wants_mirror:
            return Mirror.absent()
        return stack.relay.pull_mirror_syncs(seq_lens, rows)

    def end_of_step(
        self, stack: ServingStack, rows: Sequence[int], new_seq_lens: torch.Tensor
    ) -> None:
        return None


@serving_mode("direct")
class Direct(Eagle):
    """The backend driven directly: the scenario says whether batches carry the mirror."""

    def wants_decode_mirror(self, stack: ServingStack) -> bool:
        return stack.mirror == "present"

    def _mirror(self, stack: ServingStack, lens: Sequence[int]) -> Mirror:
        return Mirror.of_host(lens) if self.wants_decode_mirror(stack) else Mirror.absent()

    def prefill_mirror(self, stack: ServingStack, lens: Sequence[int]) -> Mirror:
        return self._mirror(stack, lens)

    def decode(self, stack: ServingStack, plan: StepPlan, dp: DPGlobalInfo | None) -> list[Pass]:
        if stack.spec is None:
            return decode_one_pass(self, stack, plan, dp)
        return super().decode(stack, plan, dp)

    def decode_mirror(self, stack: ServingStack, rows, lens, seq_lens) -> Mirror:
        return self._mirror(stack, lens)

    def end_of_step(
        self, stack: ServingStack, rows: Sequence[int], new_seq_lens: torch.Tensor
    ) -> None:
        return None
