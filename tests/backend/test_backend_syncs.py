"""Exact host-device sync counts of every metadata path, by region, per variant and mirror.
The ledger finds the syncs by itself on the emulated device.

Keys are (region under step/, kind, op); comments name rows of the fidelity table
(harness/fidelity/upstream_syncs.yaml).
"""

from __future__ import annotations

from collections import Counter

import pytest

from harness.backend import BackendConfig, DeepseekV4AttnBackend, MultiStepDraftBackend
from harness.batch.info import ForwardMode as M
from harness.batch.info import SpecInfo, make_batch
from harness.checks.backend_cases import CaseSpec, build_pool, make_case_batch, reserve_for
from syncledger import SyncLedger, emulated_device, region, set_step

SPEC = SpecInfo(draft_token_num=4, num_steps=3, topk=1)
VARIANTS = ("before", "after", "dropped")
RAISES = "AssertionError"

BUILD, OUT = "metadata/build", "metadata/out_graph"
ITEM = ("d2h_read", "item")
TOLIST = ("d2h_read", "tolist")
CPU = ("d2h_read", "cpu")
H2D = ("h2d_blocking", "tensor")


def k(region: str, kind_op: tuple[str, str], n: int = 1) -> dict:
    return {(region, *kind_op): n}


def merged(*parts: dict) -> dict:
    out: Counter = Counter()
    for p in parts:
        out.update(p)
    return dict(out)


def _counts(fn) -> tuple[dict | str, SyncLedger]:
    with SyncLedger() as led:
        set_step(1)
        try:
            with region("step"):
                fn()
        except AssertionError:
            return RAISES, led
        finally:
            set_step(None)
    got = Counter((e.region.removeprefix("step/"), e.kind.value, e.op) for e in led.events)
    return dict(got), led


def _world(dev, mode, lens=(9, 300, 700), ext=None, pad=0, steps=0):
    case = CaseSpec(mode, lens, ext, SPEC, pad_tokens=pad, draft_steps=steps)
    pool, rows = build_pool(dev, len(lens), 1000, seed=5)
    reserve_for(pool, rows, case, 5)
    return pool, rows, case


def _backend(pool, dev, variant, prep=True):
    return DeepseekV4AttnBackend(
        BackendConfig(variant=variant, prep_in_graph=prep, spec=SPEC), pool, dev
    )


# ---- eager ----------------------------------------------------------------------------------
# F01 (max_seq_len) for decode; F01 + F05 + F03/F04 for verify.
EAGER_DECODE = {
    ("before", True): {},
    ("before", False): RAISES,
    ("after", True): {},
    ("after", False): k(BUILD, ITEM),
    ("dropped", True): {},
    ("dropped", False): {},
}


@pytest.mark.parametrize("prep", [True, False])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_eager_decode(variant, mirror, prep):
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.DECODE)
        be = _backend(pool, dev, variant, prep)
        batch = make_case_batch(pool, rows, case, dev, mirror)
        got, led = _counts(lambda: be.init_forward_metadata(batch))
    assert got == EAGER_DECODE[(variant, mirror)]
    if got != RAISES:
        assert led.count(region="step/metadata/eager") == 0


def _verify_extra(variant: str, mirror: bool, prep: bool, first: bool, where: str = BUILD) -> dict:
    """Beyond F01: F05 on the first prep-on verify before a9cf5e68; F04 with prep off."""
    if prep:
        return k(where, H2D) if first and variant != "dropped" else {}
    if variant == "dropped" and mirror:
        return {}  # a9cf5e68 takes the host lengths when it has them
    return k(where, TOLIST)


@pytest.mark.parametrize("prep", [True, False])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_eager_verify_first_and_later(variant, mirror, prep):
    base = EAGER_DECODE[(variant, mirror)]
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.TARGET_VERIFY)
        be = _backend(pool, dev, variant, prep)
        batch = make_case_batch(pool, rows, case, dev, mirror)
        first, _ = _counts(lambda: be.init_forward_metadata(batch))
        later, _ = _counts(lambda: be.init_forward_metadata(batch))
    if base == RAISES:
        assert first == later == RAISES
        return
    assert first == merged(base, _verify_extra(variant, mirror, prep, True))
    assert later == merged(base, _verify_extra(variant, mirror, prep, False))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_verify_host_lengths(variant, mirror):
    """F03: only `before` reads the device lengths when the verify has no mirror (serving
    never gets there: F01 and F07 assert first)."""
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.TARGET_VERIFY)
        be = _backend(pool, dev, variant, prep=True)
        b = make_case_batch(pool, rows, case, dev, mirror)
        args = (be.MAX_SEQ_LEN_FOR_CAPTURE, b.req_pool_indices, b.seq_lens, b.seq_lens_cpu)
        be.init_forward_metadata_target_verify(*args, b.out_cache_loc)  # F05 out of the way
        got, _ = _counts(lambda: be.init_forward_metadata_target_verify(*args, b.out_cache_loc))
    assert got == (k("step", CPU) if (variant, mirror) == ("before", False) else {})


# F01 + F02 (host lengths) for the eager draft-extend of a36c8731 / 504570f4; a9cf5e68 expands
# on the device. Prefill: F01 + F02 in every variant (a9cf5e68 requires the host lengths).
EAGER_DRAFT_EXTEND = {
    ("before", True): {},
    ("before", False): RAISES,
    ("after", True): {},
    ("after", False): merged(k(BUILD, ITEM), k(BUILD, TOLIST)),
    ("dropped", True): {},
    ("dropped", False): {},
}
EAGER_PREFILL = {**EAGER_DRAFT_EXTEND, ("dropped", False): RAISES}


@pytest.mark.parametrize("pad", [0, 2])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_eager_draft_extend(variant, mirror, pad):
    """Vectorized (extend_start_loc is set): padding reads nothing back (no F09)."""
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.DRAFT_EXTEND, ext=(4, 4, 4), pad=pad)
        be = _backend(pool, dev, variant)
        batch = make_case_batch(pool, rows, case, dev, mirror)
        got, _ = _counts(lambda: be.init_forward_metadata(batch))
    assert got == EAGER_DRAFT_EXTEND[(variant, mirror)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_eager_prefill_and_sparse_prefill(variant, mirror):
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.EXTEND, ext=(3, 100, 50))
        be = _backend(pool, dev, variant)
        batch = make_case_batch(pool, rows, case, dev, mirror)
        got, _ = _counts(lambda: be.init_forward_metadata(batch))

        def forward():
            with region("forward"):
                be.sparse_prefill_workspace_len_d2h(batch)

        fwd, _ = _counts(forward)
    assert got == EAGER_PREFILL[(variant, mirror)]
    # F10 once per prefill forward, every variant; F11: sparse prefill needs the mirror
    assert fwd == (k("forward", ITEM) if mirror else RAISES)


def test_eager_idle_makes_no_sync():
    with emulated_device() as dev:
        pool, _, _ = _world(dev, M.DECODE)
        for spec in (SPEC, None):
            be = DeepseekV4AttnBackend(BackendConfig(spec=spec), pool, dev)
            idle = make_batch(
                M.IDLE, seq_lens=[], req_pool_indices=[], out_cache_loc=[], device=dev
            )
            assert _counts(lambda: be.init_forward_metadata(idle))[0] == {}  # noqa: B023


# ---- CUDA graph: capture, then replay -------------------------------------------------------
def _runner_batch(dev, pool, rows, case, bucket, mirror):
    pad = bucket - len(case.seq_lens)
    out = [0] if case.mode is M.IDLE else None
    b = make_case_batch(pool, rows, case, dev, mirror)
    if pad or out:
        b = make_batch(
            case.mode,
            seq_lens=list(case.seq_lens) + [1] * pad,
            req_pool_indices=rows[: len(case.seq_lens)] + [0] * pad,
            out_cache_loc=b.out_cache_loc,
            device=dev,
            extend_lens=[4] * bucket if case.mode is M.DRAFT_EXTEND else None,
            spec=SPEC,
            mirror=mirror,
        )
    return b


def _capture_then_replay(be, dev, pool, rows, case, mirror, bucket=4):
    cap = _runner_batch(dev, pool, rows, case, bucket, True)

    def capture():
        be.init_forward_metadata_out_graph(cap, in_capture=True)
        be.init_forward_metadata_in_graph(cap)

    batch = _runner_batch(dev, pool, rows, case, bucket, mirror)

    def replay():
        be.init_forward_metadata_out_graph(batch)
        be.init_forward_metadata_in_graph(batch)

    captured, _ = _counts(capture)
    replayed, led = _counts(replay)
    return captured, replayed, led


def capture_syncs(variant: str, prep: bool = True) -> dict:
    """F06: seq_lens.sum().item() always; seq_lens.cpu() unless a9cf5e68 does not need it."""
    needs = variant != "dropped" or not prep
    return merged(k(OUT, ITEM), k(OUT, CPU) if needs else {})


@pytest.mark.parametrize(
    "mode,prep",
    [
        (M.DECODE, True),
        (M.DECODE, False),
        (M.TARGET_VERIFY, True),
        (M.TARGET_VERIFY, False),
        (M.DRAFT_EXTEND, True),
    ],
)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_graph_capture_and_replay(mode, prep, variant, mirror):
    with emulated_device() as dev:
        ext = (4, 4, 4) if mode is M.DRAFT_EXTEND else None
        pool, rows, case = _world(dev, mode, ext=ext)
        be = _backend(pool, dev, variant, prep)
        captured, replayed, led = _capture_then_replay(be, dev, pool, rows, case, mirror)
    verify = mode is M.TARGET_VERIFY
    # capture always has the host lengths (F06), so a9cf5e68's prep-off verify needs no F04
    exp_capture = merged(
        capture_syncs(variant, prep),
        _verify_extra(variant, True, prep, True, OUT) if verify else {},
    )
    assert captured == exp_capture
    if variant == "before" and not mirror:
        assert replayed == RAISES  # F07: the assert on the mirror
        return
    exp_replay = _verify_extra(variant, mirror, prep, False, OUT) if verify else {}
    if mode is M.DRAFT_EXTEND and variant == "after" and not mirror:
        exp_replay = k(OUT, TOLIST)  # F08: D2H fallback for the host lengths
    assert replayed == exp_replay
    # The in-graph part makes no sync, and it ran (its region was entered).
    assert led.count(region="step/metadata/in_graph") == 0
    assert led.count(region="step/metadata/copy") == 0
    entered = {e.region for e in led.region_entries}
    assert {"step/metadata/out_graph", "step/metadata/copy", "step/metadata/in_graph"} <= entered


def test_graph_idle_bucket():
    with emulated_device() as dev:
        pool, _, _ = _world(dev, M.DECODE)
        be = _backend(pool, dev, "after")
        idle = make_batch(M.IDLE, seq_lens=[], req_pool_indices=[], out_cache_loc=[], device=dev)
        idle.batch_size = 4
        cap, _ = _counts(lambda: be.init_forward_metadata_out_graph(idle, in_capture=True))
        rep, _ = _counts(
            lambda: (
                be.init_forward_metadata_out_graph(idle),
                be.init_forward_metadata_in_graph(idle),
            )
        )
    # F06 on an idle batch: `seq_lens.cpu()` of no lengths copies zero bytes, which never waits
    assert cap == k(OUT, ITEM) and rep == {}


# ---- multi-step draft decode ---------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_draft_decode(variant, mirror):
    steps = SPEC.num_steps
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.DECODE, steps=steps)
        ms = MultiStepDraftBackend(steps, BackendConfig(variant=variant, spec=SPEC), pool, dev)
        batch = make_case_batch(pool, rows, case, dev, mirror)
        eager, _ = _counts(lambda: ms.init_forward_metadata(batch))
        cap_batch = make_case_batch(pool, rows, case, dev, True)
        captured, _ = _counts(
            lambda: (
                ms.init_forward_metadata_out_graph(cap_batch, True),
                ms.init_forward_metadata_in_graph(cap_batch),
            )
        )
        replayed, led = _counts(
            lambda: (
                ms.init_forward_metadata_out_graph(batch),
                ms.init_forward_metadata_in_graph(batch),
            )
        )
    # Eagerly the first num_steps-1 inner backends each build (F01 per backend).
    per_backend = EAGER_DECODE[(variant, mirror)]
    exp_eager = (
        RAISES if per_backend == RAISES else {kk: v * (steps - 1) for kk, v in per_backend.items()}
    )
    assert eager == exp_eager
    # every inner backend captures
    assert captured == {kk: v * steps for kk, v in capture_syncs(variant).items()}
    if variant == "before" and not mirror:
        assert replayed == RAISES  # the draft runner passes None for an absent mirror
        return
    assert replayed == {}
    copies = [e for e in led.region_entries if e.region == "step/metadata/copy"]
    assert len(copies) == 2  # backend 0's own copy + one region for steps 1..num_steps-2


# ---- needs_cpu_seq_lens, max_context_len ----------------------------------------------------
@pytest.mark.parametrize(
    "variant,spec,prep,expected",
    [
        ("before", None, True, True),
        ("before", SPEC, True, True),
        ("after", None, True, False),
        ("after", SPEC, True, True),
        ("dropped", SPEC, True, False),
        ("dropped", SPEC, False, True),
        ("dropped", None, True, False),
    ],
)
def test_needs_cpu_seq_lens(variant, spec, prep, expected):
    with emulated_device() as dev:
        pool, _, _ = _world(dev, M.DECODE)
        cfg = BackendConfig(variant=variant, spec=spec, prep_in_graph=prep)
        assert DeepseekV4AttnBackend(cfg, pool, dev).needs_cpu_seq_lens is expected
        if spec is not None:
            assert MultiStepDraftBackend(3, cfg, pool, dev).needs_cpu_seq_lens is expected


def test_max_context_len_exists_from_a9cf5e68_on():
    with emulated_device() as dev:
        pool, _, _ = _world(dev, M.DECODE)
        has = {
            v: hasattr(
                DeepseekV4AttnBackend(BackendConfig(variant=v), pool, dev), "max_context_len"
            )
            for v in VARIANTS
        }
    assert has == {"before": False, "after": False, "dropped": True}
