"""Full metadata of the backend == the per-token oracle, for every mode, path and model;
variant equivalences with and without the host mirror."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.backend import BackendConfig, DeepseekV4AttnBackend, MultiStepDraftBackend
from harness.backend.oracle import full_metadata
from harness.batch.info import ForwardMode as M
from harness.batch.info import SpecInfo, make_batch
from harness.checks.backend_cases import (
    CaseSpec,
    build_pool,
    expected_span,
    make_case_batch,
    metadata_lists,
    oracle_case,
    out_locations,
    reserve_for,
)
from syncledger import emulated_device

CONTEXT = 1000
SPEC = SpecInfo(draft_token_num=4, num_steps=3, topk=1)
THRESHOLD = 16  # a low indexer-schedule threshold so short contexts list tokens
SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
EXTEND_MODES = (M.EXTEND, M.DRAFT_EXTEND)


@st.composite
def cases(draw, modes=(M.DECODE, M.TARGET_VERIFY, M.EXTEND, M.DRAFT_EXTEND)) -> CaseSpec:
    mode = draw(st.sampled_from(modes))
    bs = draw(st.integers(1, 4))
    lo = SPEC.draft_token_num + 1 if mode is M.DRAFT_EXTEND else 1
    lens = tuple(draw(st.lists(st.integers(lo, CONTEXT), min_size=bs, max_size=bs)))
    ext = None
    if mode is M.EXTEND:
        ext = tuple(draw(st.integers(1, min(length, 300))) for length in lens)
    elif mode is M.DRAFT_EXTEND:
        ext = (SPEC.draft_token_num,) * bs
    pad = draw(st.integers(0, 3)) if mode in EXTEND_MODES else 0
    return CaseSpec(mode, lens, ext, spec=SPEC, pad_tokens=pad)


def _config(model: str, prep: bool, variant: str = "after", spec=SPEC) -> BackendConfig:
    return BackendConfig(
        model=model,
        variant=variant,
        prep_in_graph=prep,
        spec=spec,
        topk_cluster_threshold=THRESHOLD,
    )


def _setup(dev, case: CaseSpec, seed: int):
    pool, rows = build_pool(dev, max(len(case.seq_lens), 1), CONTEXT, seed)
    reserve_for(pool, rows, case, seed)
    return pool, rows


def _eager_span(be: DeepseekV4AttnBackend, case: CaseSpec, mirror: bool) -> int:
    return expected_span(be, case, mirror=mirror, graph=False)


def _assert_same(got: dict, exp: dict) -> None:
    assert sorted(got) == sorted(exp)
    bad = [k for k in exp if got[k] != exp[k]]
    assert not bad, f"fields differ from the oracle: {bad}"


@SETTINGS
@given(
    case=cases(),
    model=st.sampled_from(["flash", "pro"]),
    prep=st.booleans(),
    variant=st.sampled_from(["before", "after", "dropped"]),
    seed=st.integers(0, 1000),
)
def test_eager_matches_oracle(case, model, prep, variant, seed):
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, seed)
        be = DeepseekV4AttnBackend(_config(model, prep, variant), pool, dev)
        be.init_forward_metadata(make_case_batch(pool, rows, case, dev, mirror=True))
        exp = full_metadata(
            oracle_case(pool, rows, case, be, max_seq_len=_eager_span(be, case, True))
        )
        _assert_same(metadata_lists(be.forward_metadata), exp)


def _runner_batch(pool, rows, case: CaseSpec, bucket_bs: int, dev, mirror: bool):
    """What the CUDA-graph runner hands the backend: rows padded to the bucket (seq_len 1,
    pool row 0), out-locations unpadded (the backend pads them)."""
    pad = bucket_bs - len(case.seq_lens)
    lens = list(case.seq_lens) + [1] * pad
    rpi = rows[: len(case.seq_lens)] + [0] * pad
    b = make_batch(
        case.mode,
        seq_lens=lens,
        req_pool_indices=rpi,
        out_cache_loc=out_locations(pool, rows, case),
        device=dev,
        extend_lens=[SPEC.draft_token_num] * bucket_bs if case.mode is M.DRAFT_EXTEND else None,
        spec=SPEC,
        mirror=mirror,
    )
    return b, lens, rpi


def _capture_batch(mode, bucket_bs: int, dev, per_req: int = 0):
    """The runner's static batch at capture time (values are dummies; capture reads them)."""
    return make_batch(
        mode,
        seq_lens=[7] * bucket_bs,
        req_pool_indices=[0] * bucket_bs,
        out_cache_loc=[0] * (bucket_bs * per_req),
        device=dev,
        extend_lens=[SPEC.draft_token_num] * bucket_bs if mode is M.DRAFT_EXTEND else None,
        spec=SPEC,
    )


def _graph_run(be, pool, rows, case, bucket_bs, dev, mirror=True):
    """Capture with a dummy batch of the bucket, then replay `case` padded to the bucket."""
    cap_batch = _capture_batch(case.mode, bucket_bs, dev)
    be.init_forward_metadata_out_graph(cap_batch, in_capture=True)
    be.init_forward_metadata_in_graph(cap_batch)  # warm-up
    be.init_forward_metadata_in_graph(cap_batch)  # capture
    batch, lens, rpi = _runner_batch(pool, rows, case, bucket_bs, dev, mirror)
    be.init_forward_metadata_out_graph(batch, in_capture=False)
    be.init_forward_metadata_in_graph(batch)
    return batch, lens, rpi


@SETTINGS
@given(
    case=cases(modes=(M.DECODE, M.TARGET_VERIFY, M.DRAFT_EXTEND)),
    model=st.sampled_from(["flash", "pro"]),
    prep=st.booleans(),
    extra=st.integers(0, 2),
    seed=st.integers(0, 1000),
)
def test_graph_replay_matches_oracle(case, model, prep, extra, seed):
    case = CaseSpec(case.mode, case.seq_lens, case.extend_lens, SPEC)  # runner pads, not the batch
    bucket_bs = len(case.seq_lens) + extra
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, seed)
        be = DeepseekV4AttnBackend(_config(model, prep), pool, dev)
        _, lens, rpi = _graph_run(be, pool, rows, case, bucket_bs, dev)
        per_req = SPEC.draft_token_num if case.mode is not M.DECODE else 1
        out = out_locations(pool, rows, case)
        out += [0] * (bucket_bs * per_req - len(out))
        same_length = case.mode is M.DRAFT_EXTEND and be.policy.draft_extend_same_length
        span = pool.page_size if same_length else be.MAX_SEQ_LEN_FOR_CAPTURE
        ext_case = CaseSpec(
            case.mode, tuple(lens), case.extend_lens and (SPEC.draft_token_num,) * bucket_bs, SPEC
        )
        exp = full_metadata(
            oracle_case(
                pool,
                rows,
                ext_case,
                be,
                max_seq_len=span,
                out_cache_loc=out,
                seq_lens=lens,
                req_pool_indices=rpi,
            )
        )
        _assert_same(metadata_lists(be.forward_metadata), exp)
        assert be.graph_metadata_for(*be._graph_key) is be.forward_metadata


@SETTINGS
@given(case=cases(), prep=st.booleans(), seed=st.integers(0, 1000))
def test_variants_identical_with_mirror(case, prep, seed):
    results = []
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, seed)
        batch = make_case_batch(pool, rows, case, dev, mirror=True)
        for variant in ("before", "after", "dropped"):
            be = DeepseekV4AttnBackend(_config("flash", prep, variant), pool, dev)
            be.init_forward_metadata(batch)
            got = metadata_lists(be.forward_metadata)
            if case.mode is M.DRAFT_EXTEND:
                # SWA only: the page table is a placeholder, as wide as the longest request
                # before a9cf5e68 and one page from it on
                del got["page_table"]
            results.append(got)
    assert results[0] == results[1] == results[2]


@SETTINGS
@given(
    case=cases(),
    prep=st.booleans(),
    model=st.sampled_from(["flash", "pro"]),
    seed=st.integers(0, 1000),
)
def test_after_without_mirror_equals_with_mirror(case, prep, model, seed):
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, seed)
        got = []
        for mirror in (True, False):
            be = DeepseekV4AttnBackend(_config(model, prep, "after"), pool, dev)
            be.init_forward_metadata(make_case_batch(pool, rows, case, dev, mirror=mirror))
            got.append(metadata_lists(be.forward_metadata))
    assert got[0] == got[1]


@SETTINGS
@given(
    case=cases(modes=(M.DECODE, M.TARGET_VERIFY, M.DRAFT_EXTEND)),
    prep=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_dropped_without_mirror_matches_oracle(case, prep, seed):
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, seed)
        be = DeepseekV4AttnBackend(_config("pro", prep, "dropped"), pool, dev)
        be.init_forward_metadata(make_case_batch(pool, rows, case, dev, mirror=False))
        span = _eager_span(be, case, mirror=False)
        _assert_same(
            metadata_lists(be.forward_metadata),
            full_metadata(oracle_case(pool, rows, case, be, max_seq_len=span)),
        )


def test_prefill_requires_the_mirror_in_dropped():
    """a9cf5e68 keeps prefill on the scheduler's host lengths: it asserts them."""
    case = CaseSpec(M.EXTEND, (9, 300), (3, 4), SPEC)
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, 0)
        be = DeepseekV4AttnBackend(_config("flash", True, "dropped"), pool, dev)
        with pytest.raises(AssertionError, match="prefill needs seq_lens_cpu"):
            be.init_forward_metadata(make_case_batch(pool, rows, case, dev, mirror=False))


@pytest.mark.parametrize("mode", [M.DECODE, M.TARGET_VERIFY, M.EXTEND, M.DRAFT_EXTEND])
def test_before_without_mirror_raises(mode):
    case = CaseSpec(mode, (9, 300), (3, 4) if mode in EXTEND_MODES else None, SPEC)
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, 0)
        be = DeepseekV4AttnBackend(_config("flash", True, "before"), pool, dev)
        with pytest.raises(AssertionError):
            be.init_forward_metadata(make_case_batch(pool, rows, case, dev, mirror=False))
        if mode is not M.EXTEND:  # the replay path asserts too (F07)
            batch, _, _ = _runner_batch(pool, rows, case, 2, dev, mirror=False)
            with pytest.raises(AssertionError):
                be.init_forward_metadata_out_graph(batch)


def test_idle():
    case = CaseSpec(M.IDLE, ())
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, 0)
        for spec, expect_none in ((SPEC, True), (None, False)):
            be = DeepseekV4AttnBackend(_config("flash", True, spec=spec), pool, dev)
            be.init_forward_metadata(make_case_batch(pool, rows, case, dev, mirror=True))
            assert (be.forward_metadata is None) is expect_none
            if not expect_none:
                assert be.forward_metadata.num_tokens == 0
        # Out of graph, IDLE fills the bucket with length-1 rows of the padding request.
        be = DeepseekV4AttnBackend(_config("flash", True), pool, dev)
        idle = make_batch(M.IDLE, seq_lens=[], req_pool_indices=[], out_cache_loc=[], device=dev)
        idle.batch_size = 3
        be.init_forward_metadata_out_graph(idle, in_capture=True)
        be.init_forward_metadata_in_graph(idle)
        got = metadata_lists(be.forward_metadata)
        assert got["seq_lens_casual"] == [1, 1, 1] and got["token_pool_idx"] == [0, 0, 0]
        decode = CaseSpec(M.DECODE, (1, 1, 1))
        exp = full_metadata(
            oracle_case(
                pool,
                [0, 0, 0],
                decode,
                be,
                max_seq_len=be.MAX_SEQ_LEN_FOR_CAPTURE,
                out_cache_loc=[0, 0, 0],
            )
        )
        _assert_same(got, exp)


@SETTINGS
@given(
    lens=st.lists(st.integers(1, CONTEXT - 4), min_size=1, max_size=3),
    prep=st.booleans(),
    replay=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_multistep_draft_matches_oracle(lens, prep, replay, seed):
    steps = SPEC.num_steps
    case = CaseSpec(M.DECODE, tuple(lens), spec=SPEC, draft_steps=steps)
    with emulated_device() as dev:
        pool, rows = _setup(dev, case, seed)
        ms = MultiStepDraftBackend(steps, _config("flash", prep), pool, dev)
        batch = make_case_batch(pool, rows, case, dev, mirror=True)
        if replay:
            warm = _capture_batch(M.DECODE, len(lens), dev, per_req=steps)
            ms.init_forward_metadata_out_graph(warm, in_capture=True)
            ms.init_forward_metadata_in_graph(batch)
            ms.init_forward_metadata_out_graph(batch)
            ms.init_forward_metadata_in_graph(batch)
        else:
            ms.init_forward_metadata(batch)
        for i, md in enumerate(ms.step_metadata()):
            be = ms.attn_backends[i]
            span = be.MAX_SEQ_LEN_FOR_CAPTURE if (prep or replay) else max(lens)
            exp = full_metadata(oracle_case(pool, rows, case, be, max_seq_len=span))
            _assert_same(metadata_lists(md), exp)


def test_draft_out_cache_loc_layout_is_request_major():
    """Step i of request r writes slot r * num_steps + i of the shared buffer."""
    with emulated_device() as dev:
        case = CaseSpec(M.DECODE, (10, 20), spec=SPEC, draft_steps=3)
        pool, rows = _setup(dev, case, 0)
        ms = MultiStepDraftBackend(3, _config("flash", True), pool, dev)
        ms.init_forward_metadata(make_case_batch(pool, rows, case, dev, True))
        out = out_locations(pool, rows, case)
        for i, md in enumerate(ms.step_metadata()):
            assert metadata_lists(md)["raw_out_loc"] == [out[i], out[3 + i]]


def test_plain_cpu_device_runs():
    """The same code runs on a plain CPU device too (no emulation, no pinning)."""
    dev = torch.device("cpu")
    case = CaseSpec(M.EXTEND, (50, 400), (10, 20), SPEC)
    pool, rows = _setup(dev, case, 3)
    be = DeepseekV4AttnBackend(_config("flash", True), pool, dev)
    be.init_forward_metadata(make_case_batch(pool, rows, case, dev, True))
    exp = full_metadata(oracle_case(pool, rows, case, be, max_seq_len=400))
    _assert_same(metadata_lists(be.forward_metadata), exp)
