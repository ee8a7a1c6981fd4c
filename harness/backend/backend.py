"""A faithful model of sglang's DeepSeek-V4 attention backend metadata paths.

Entry points as upstream: ``init_forward_metadata`` (eager), ``init_forward_metadata_out_graph``
(host work before CUDA-graph capture or replay), ``init_forward_metadata_in_graph`` (device-only
work recorded in the graph), ``_build_forward_metadata`` and ``needs_cpu_seq_lens``. What the
code does with the host mirror ``seq_lens_cpu`` is decided by a variant policy
(:mod:`harness.backend.variants`); everything else is shared. Ids such as ``F06`` name rows of
the fidelity table (``harness/fidelity/upstream_syncs.yaml``).

Regions: ``metadata/build`` (eager host build), ``metadata/eager`` (the eager device part),
``metadata/out_graph``, ``metadata/copy`` (into the captured objects), ``metadata/in_graph``;
callers open ``step`` around them.
"""

from __future__ import annotations

import enum

import torch
import torch.nn.functional as F

import kernels as kernel_lib
from harness.backend import expand
from harness.backend.config import BackendConfig
from harness.backend.metadata import AnyMetadata, FullMetadata, RawDecodeMetadata, RawVerifyMetadata
from harness.backend.variants import VariantPolicy, get_variant
from harness.batch.info import ForwardBatch, ForwardMode
from harness.batch.pool import ReqToTokenPool
from syncledger import region

# Length of the verify extend-lengths buffer that a36c8731 and 504570f4 build on the first
# verify (F05).
VERIFY_LENS_BUFFER_LEN = 1025


class GraphBucket(enum.Enum):
    DECODE_OR_IDLE = "decode_or_idle"
    TARGET_VERIFY = "target_verify"
    DRAFT_EXTEND = "draft_extend"

    @classmethod
    def of(cls, mode: ForwardMode) -> GraphBucket:
        if mode.is_decode_or_idle():
            return cls.DECODE_OR_IDLE
        if mode.is_target_verify():
            return cls.TARGET_VERIFY
        if mode.is_draft_extend():
            return cls.DRAFT_EXTEND
        raise NotImplementedError(f"no CUDA-graph bucket for {mode.name}")


class DeepseekV4AttnBackend:
    """One backend; ``variant`` ("before" | "after" | "dropped") overrides ``config.variant``.

    ``step_id``/``draft_steps``/``draft_topk`` make it the inner backend of draft step
    ``step_id`` of a multi-step draft backend: its decode out-locations are that step's slice
    of the shared ``[bs * topk * num_steps]`` buffer (request-major, as upstream's
    ``per_step_draft_out_cache_loc``)."""

    def __init__(
        self,
        config: BackendConfig,
        pool: ReqToTokenPool,
        device: torch.device,
        variant: str | VariantPolicy | None = None,
        *,
        step_id: int = 0,
        draft_steps: int = 0,
        draft_topk: int = 1,
    ):
        self.config = config
        self.policy = get_variant(variant if variant is not None else config.variant)
        self.pool = pool
        self.device = device
        self.req_to_token = pool.req_to_token
        self.full_to_swa = pool.full_to_swa
        assert pool.page_size == kernel_lib.KV_PAGE_SIZE, "the system hardcodes page_size=256"
        self.MAX_SEQ_LEN_FOR_CAPTURE = int(self.req_to_token.shape[1])
        if self.policy.has_max_context_len:
            self.max_context_len = pool.cfg.context_len
        self.index_topk = config.shape.index_topk
        self.ops = kernel_lib.get_ops(config.kernels)
        self.prep_in_graph = config.prep_in_graph
        self.num_draft_tokens = config.spec.draft_token_num if config.spec else None
        self.draft_extend_num_tokens_per_req = self.num_draft_tokens or 1
        self.step_id = step_id
        self.draft_steps = draft_steps
        self.draft_topk = draft_topk
        self.needs_cpu_seq_lens: bool = self.policy.needs_cpu_seq_lens(
            config.spec_configured, config.prep_in_graph
        )
        self.extend_seq_lens_buffer: torch.Tensor | None = None
        if self.policy.verify_buffer_at_construction and self.num_draft_tokens is not None:
            rows = int(self.req_to_token.shape[0])
            self.extend_seq_lens_buffer = torch.full(
                (rows,), self.num_draft_tokens, dtype=torch.int32, device=device
            )
        self.forward_metadata: AnyMetadata | None = None
        # Objects the graphs were captured with, and the full metadata each graph produces.
        self.graph_metadata: dict[tuple[GraphBucket, int], AnyMetadata] = {}
        self.graph_full_metadata: dict[tuple[GraphBucket, int], FullMetadata] = {}
        self._graph_key: tuple[GraphBucket, int] | None = None

    @property
    def variant(self) -> str:
        return self.policy.name

    @property
    def reads_runner_mirror(self) -> bool:
        """Whether host lengths a CUDA-graph runner hands over are read at all (a stale
        buffer is a hazard only then)."""
        probe = torch.empty(0, dtype=torch.int64)
        return self.policy.replay_mirror(probe, self.needs_cpu_seq_lens) is probe

    # ---- eager ----------------------------------------------------------------------------
    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        self._graph_key = None
        if batch.forward_mode.is_idle() and self.config.spec_configured:
            self.forward_metadata = None  # MTP idle: nothing to build
            return
        with region("metadata", "build"):
            md = self._build_forward_metadata(batch)
        with region("metadata", "eager"):
            self.forward_metadata = self._complete(md)

    def _build_forward_metadata(self, batch: ForwardBatch) -> AnyMetadata:
        mode = batch.forward_mode
        rpi = batch.req_pool_indices
        seq_lens = batch.seq_lens.to(torch.int32)
        seq_lens_cpu = batch.seq_lens_cpu
        cap = self.MAX_SEQ_LEN_FOR_CAPTURE
        if mode.is_idle():  # empty batch: nothing to size, nothing to read
            return self._decode_metadata(cap, rpi, seq_lens, batch.out_cache_loc)
        self.policy.check_build_mirror(seq_lens_cpu)  # F01
        max_seq_len = self.policy.max_seq_len_may_d2h(batch.seq_lens, seq_lens_cpu, cap)  # F01
        if mode.is_decode():
            return self._decode_metadata(max_seq_len, rpi, seq_lens, batch.out_cache_loc)
        if mode.is_target_verify():
            return self.init_forward_metadata_target_verify(
                max_seq_len, rpi, seq_lens, seq_lens_cpu, batch.out_cache_loc
            )
        if mode.is_draft_extend() and self.policy.draft_extend_same_length:
            return self._draft_extend_same_length(rpi, seq_lens, batch.out_cache_loc)
        if mode.is_extend_like():
            return self._prefill_like(batch, max_seq_len, compress=mode.is_prefill())
        raise NotImplementedError(f"unsupported mode {mode}")

    # ---- per-mode builders ------------------------------------------------------------------
    def _decode_metadata(
        self, max_seq_len: int, rpi: torch.Tensor, seq_lens: torch.Tensor, out: torch.Tensor
    ) -> AnyMetadata:
        raw = RawDecodeMetadata(rpi, seq_lens, out)
        if self.prep_in_graph:
            return raw
        return self._upgrade(raw, max_seq_len, keep_source=False)

    def _verify_extend_lens(self, bs: int) -> torch.Tensor:
        """The per-request verify lengths: a view of the persistent buffer."""
        d = self.num_draft_tokens
        if self.extend_seq_lens_buffer is None:
            # F05: built from a host list straight onto the device, on the first call.
            self.extend_seq_lens_buffer = torch.tensor(  # fidelity: F05
                [d] * VERIFY_LENS_BUFFER_LEN, dtype=torch.int32, device=self.device
            )
        assert bs <= int(self.extend_seq_lens_buffer.shape[0])
        if self.policy.verify_buffer_at_construction:
            self.extend_seq_lens_buffer[:bs].fill_(d)
        return self.extend_seq_lens_buffer[:bs]

    def init_forward_metadata_target_verify(
        self,
        max_seq_len: int,
        rpi: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor | None,
        out_cache_loc: torch.Tensor,
    ) -> AnyMetadata:
        d = self.num_draft_tokens
        assert d is not None, "TARGET_VERIFY needs a speculative config"
        if self.prep_in_graph:
            host = self.policy.verify_lens_host_may_d2h(
                seq_lens, seq_lens_cpu, self.needs_cpu_seq_lens
            )  # F03
            ext = self._verify_extend_lens(int(seq_lens.shape[0]))
            return RawVerifyMetadata(rpi, seq_lens, out_cache_loc, ext, host)
        lens = self.policy.verify_prep_off_lens_may_d2h(seq_lens, seq_lens_cpu)  # F04
        bs = len(lens)
        host = [int(x) + d for x in lens]
        if self.policy.loop_expansion_reads_pad:
            exp = expand.expand_loop_may_d2h(
                host, [d] * bs, rpi, int(out_cache_loc.shape[0]), self.device
            )  # F09
        else:
            exp = expand.expand_device(self.ops, seq_lens + d, d, rpi, int(out_cache_loc.shape[0]))
        return self._full(exp, out_cache_loc, max_seq_len, compress=True)

    def _draft_extend_same_length(
        self, rpi: torch.Tensor, seq_lens: torch.Tensor, out_cache_loc: torch.Tensor
    ) -> FullMetadata:
        """a9cf5e68: every request extends by the same count, expanded on the device; SWA only,
        with a one-page page-table placeholder. No host lengths, no device read."""
        n = self.draft_extend_num_tokens_per_req
        exp = expand.expand_device(self.ops, seq_lens, n, rpi, int(out_cache_loc.shape[0]))
        return self._full(exp, out_cache_loc, self.pool.page_size, compress=False)

    def _draft_extend_from_host(
        self, rpi: torch.Tensor, seq_lens: torch.Tensor, host: list[int], out: torch.Tensor
    ) -> FullMetadata:
        """The draft-extend graph bucket of a36c8731 / 504570f4: the per-request loop
        expansion from host lengths, SWA only."""
        n = self.draft_extend_num_tokens_per_req
        bs = len(host)
        ext = [n] * bs
        if self.policy.loop_expansion_reads_pad:
            exp = expand.expand_loop_may_d2h(host, ext, rpi, int(out.shape[0]), self.device)
        else:
            exp = expand.expand_device(self.ops, seq_lens, n, rpi, int(out.shape[0]))
        return self._full(exp, out, self.MAX_SEQ_LEN_FOR_CAPTURE, compress=False)

    def _prefill_like(
        self, batch: ForwardBatch, max_seq_len: int, *, compress: bool
    ) -> FullMetadata:
        """The prefill branch of ``_build_forward_metadata``: EXTEND, and the eager
        draft-extend of a36c8731 / 504570f4 (``compress=False``: SWA only, no plans)."""
        ext_list, ext = batch.extend_seq_lens_cpu, batch.extend_seq_lens
        assert ext_list is not None and ext is not None, "extend batches need extend lengths"
        host = self.policy.extend_lens_host_may_d2h(batch.seq_lens, batch.seq_lens_cpu)  # F02
        padded = int(batch.out_cache_loc.shape[0])
        rpi = batch.req_pool_indices
        # extend_start_loc is set, so the expansion is the vectorized, device-only one
        assert batch.extend_start_loc is not None, "extend batches carry extend_start_loc"
        exp = expand.expand_device(self.ops, batch.seq_lens, ext, rpi, padded)
        fm = self._full(exp, batch.out_cache_loc, max_seq_len, compress=compress)
        if compress:  # compressor plans from host lists: pinned buffer, async copy
            fm.c4_compress_plan = expand.compressor_plan_host(host, ext_list, 4, self.device)
            fm.c128_compress_plan = expand.compressor_plan_host(host, ext_list, 128, self.device)
        return fm

    def _full(
        self, exp: expand.Expansion, out: torch.Tensor, max_seq_len: int, *, compress: bool
    ) -> FullMetadata:
        return expand.full_from_expansion(
            self.ops,
            exp,
            req_to_token=self.req_to_token,
            full_to_swa=self.full_to_swa,
            out_loc=out,
            max_seq_len=max_seq_len,
            index_topk=self.index_topk,
            compress=compress,
            topk_cluster_threshold=self.config.topk_cluster_threshold,
        )

    # ---- the device part (in graph, or eagerly) ------------------------------------------
    def _step_out_cache_loc(self, out: torch.Tensor, bs: int) -> torch.Tensor:
        if self.draft_steps > 1:
            steps, topk = self.draft_steps, self.draft_topk
            return out.view(bs, topk, steps)[:, :, self.step_id].reshape(bs * topk)
        return out

    def _upgrade(
        self, raw: RawDecodeMetadata | RawVerifyMetadata, max_seq_len: int, *, keep_source: bool
    ) -> FullMetadata:
        bs = int(raw.seq_lens.shape[0])
        is_verify = isinstance(raw, RawVerifyMetadata)
        out = raw.out_cache_loc if is_verify else self._step_out_cache_loc(raw.out_cache_loc, bs)
        inputs = kernel_lib.UpgradeInputs(
            req_to_token=self.req_to_token,
            req_pool_indices=raw.req_pool_indices,
            seq_lens=raw.seq_lens,
            out_cache_loc=out,
            full_to_swa=self.full_to_swa,
            num_draft_tokens=self.num_draft_tokens if is_verify else 0,
            max_seq_len=max_seq_len,
            index_topk=self.index_topk,
            topk_cluster_threshold=self.config.topk_cluster_threshold,
        )
        t = self.ops.upgrade(inputs)
        source = raw if keep_source else None
        draft_out = raw.out_cache_loc if self.draft_steps > 1 and not is_verify else None
        return FullMetadata.from_tensors(
            t, out, self.index_topk, source_raw=source, draft_out_cache_loc=draft_out
        )

    def _complete(self, md: AnyMetadata | None) -> FullMetadata | None:
        """Raw -> full (prep in graph); a full object upgraded before (graph warm-up) is
        upgraded again from its raw source so that a capture records the upgrade."""
        cap = self.MAX_SEQ_LEN_FOR_CAPTURE
        if isinstance(md, (RawDecodeMetadata, RawVerifyMetadata)):
            return self._upgrade(md, cap, keep_source=True)
        if isinstance(md, FullMetadata) and md.source_raw is not None:
            return self._upgrade(md.source_raw, cap, keep_source=True)
        if isinstance(md, FullMetadata):
            self._refresh_out_locations(md)
        return md

    def _refresh_out_locations(self, md: FullMetadata) -> None:
        """Re-derive what depends on this step's write slots (upstream recomputes the SWA
        out-locations in graph; a draft step also takes its own slice after a copy)."""
        if md.draft_out_cache_loc is not None:
            bs = int(md.draft_out_cache_loc.shape[0]) // (self.draft_topk * self.draft_steps)
            md.raw_out_loc = self._step_out_cache_loc(md.draft_out_cache_loc, bs)
            if md.has_compression:
                md.c4_out_loc = self.ops.compression(md.seq_lens_casual, md.raw_out_loc, 4)[0]
                md.c128_out_loc = self.ops.compression(md.seq_lens_casual, md.raw_out_loc, 128)[0]
        md.swa_out_cache_loc = self.ops.swa_out_cache_loc(md.raw_out_loc, self.full_to_swa)

    # ---- CUDA graph -----------------------------------------------------------------------
    def init_forward_metadata_out_graph(
        self, batch: ForwardBatch, in_capture: bool = False
    ) -> None:
        with region("metadata", "out_graph"):
            bucket, temp = self._out_graph_build_capture_d2h(batch, in_capture)
        with region("metadata", "copy"):
            self.replay_cuda_graph_metadata_from(batch.batch_size, temp, bucket)

    def _out_graph_build_capture_d2h(
        self, batch: ForwardBatch, in_capture: bool
    ) -> tuple[GraphBucket, AnyMetadata]:
        mode = batch.forward_mode
        bucket = GraphBucket.of(mode)
        bs = batch.batch_size
        dev = self.device
        rpi, seq_lens = batch.req_pool_indices, batch.seq_lens
        flag = self.needs_cpu_seq_lens
        if in_capture:
            # The captured graph does no real cache writes: dummy out-locations (sized below).
            out_cache_loc = torch.zeros(0, dtype=torch.int64, device=dev)
            _seq_lens_sum = int(seq_lens.sum().item())  # fidelity: F06a
            seq_lens_cpu = self.policy.capture_mirror_may_d2h(seq_lens, flag)  # F06
        else:
            out_cache_loc = batch.out_cache_loc
            seq_lens_cpu = batch.seq_lens_cpu
        if mode.is_idle():
            seq_lens = torch.ones(bs, dtype=torch.int64, device=dev)
            seq_lens_cpu = torch.ones(bs, dtype=torch.int64)
            rpi = torch.zeros(bs, dtype=torch.int64, device=dev)
            out_cache_loc = torch.zeros(0, dtype=torch.int64, device=dev)
        if not in_capture:  # as upstream, after an IDLE batch's lengths are substituted
            seq_lens_cpu = self.policy.replay_mirror(seq_lens_cpu, flag)  # F07
        seq_lens = seq_lens[:bs].to(torch.int32)
        rpi = rpi[:bs]
        cap = self.MAX_SEQ_LEN_FOR_CAPTURE
        if seq_lens_cpu is not None:  # a host op on the runner's buffer
            seq_lens_cpu = seq_lens_cpu[:bs]
            assert int(seq_lens_cpu.max()) <= cap

        def padded(n_tokens: int) -> torch.Tensor:
            return F.pad(out_cache_loc, (0, n_tokens - int(out_cache_loc.shape[0])), value=0)

        if bucket is GraphBucket.DECODE_OR_IDLE:
            per_req = self.draft_topk * self.draft_steps if self.draft_steps > 1 else 1
            return bucket, self._decode_metadata(cap, rpi, seq_lens, padded(bs * per_req))
        if bucket is GraphBucket.TARGET_VERIFY:
            out = padded(bs * self.num_draft_tokens)
            return bucket, self.init_forward_metadata_target_verify(
                cap, rpi, seq_lens, seq_lens_cpu, out
            )
        out = padded(self.draft_extend_num_tokens_per_req * bs)
        if self.policy.draft_extend_same_length:
            return bucket, self._draft_extend_same_length(rpi, seq_lens, out)
        host = self.policy.extend_lens_host_may_d2h(seq_lens, seq_lens_cpu)  # F08 (as F02)
        return bucket, self._draft_extend_from_host(rpi, seq_lens, host, out)

    def replay_cuda_graph_metadata_from(
        self, bs: int, temp: AnyMetadata, bucket: GraphBucket
    ) -> None:
        key = (bucket, bs)
        chosen = self.graph_metadata.get(key)
        if chosen is None:
            self.graph_metadata[key] = temp
            chosen = temp
        else:
            chosen.copy_(temp)  # device-to-device copies into the captured object
        self.forward_metadata = chosen
        self._graph_key = key

    def init_forward_metadata_in_graph(self, batch: ForwardBatch) -> None:
        with region("metadata", "in_graph"):
            full = self._complete(self.forward_metadata)
            self.forward_metadata = full
            if self._graph_key is not None and full is not None:
                self.graph_full_metadata[self._graph_key] = full

    def on_after_cuda_graph_warmup(self) -> None:
        """Restore the raw metadata after warm-up so the capture re-runs the upgrade (as
        upstream; optional here since full metadata keeps its raw source)."""
        md = self.forward_metadata
        if isinstance(md, FullMetadata) and md.source_raw is not None:
            self.forward_metadata = md.source_raw

    def graph_metadata_for(self, bucket: GraphBucket, bs: int) -> FullMetadata | None:
        """The full metadata a captured graph writes (valid after its replay on CUDA)."""
        return self.graph_full_metadata.get((bucket, bs))

    # ---- forward time ---------------------------------------------------------------------
    def sparse_prefill_workspace_len_d2h(self, batch: ForwardBatch) -> int:
        """Sparse prefill (``_forward_prefill_sparse``) requires the host mirror (F11) and
        sizes its SWA workspace from ``int(swa_offsets[-1].item())`` (F10): one D2H per prefill
        forward. Call it inside the ``step/forward`` region."""
        assert batch.forward_mode.is_prefill() and batch.extend_seq_lens is not None
        seq_lens_cpu = batch.seq_lens_cpu
        assert seq_lens_cpu is not None  # fidelity: F11
        ext = batch.extend_seq_lens.to(torch.int64)
        per_req = torch.minimum(batch.seq_lens.to(torch.int64), ext + kernel_lib.SWA_WINDOW - 1)
        swa_offsets = torch.cumsum(per_req, 0)
        return int(swa_offsets[-1].item())  # fidelity: F10
