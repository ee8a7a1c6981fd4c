"""Exact host-device sync counts of every metadata path, by region, per variant and mirror
(reference section 3). The ledger finds the syncs by itself on the emulated device.

Keys are (region under step/, kind, op); rows of reference section 3 in comments.
"""

from __future__ import annotations

from collections import Counter

import pytest

from harness.backend import BackendConfig, DeepseekV4AttnBackend, MultiStepDraftBackend
from harness.checks.backend_cases import CaseSpec, build_pool, make_case_batch, reserve_for
from harness.serving.batch import ForwardMode as M
from harness.serving.batch import SpecInfo, make_batch
from harness.sync import SyncLedger, emulated_device, region, set_step

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


# ---- eager --------------------------------------------------------------------------------
# Row 1 (max_seq_len) for decode; rows 1 + 5 + 3/4 for verify.
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
    prep_off = {} if prep else k(BUILD, TOLIST)  # row 4: seq_lens.tolist() on the device tensor
    assert first == merged(base, k(BUILD, H2D), prep_off)  # row 5 on the first call only
    assert later == merged(base, prep_off)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_verify_row3_fallback(variant, mirror):
    """Row 3: with the span given (no row 1), only `before` reads the device lengths."""
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.TARGET_VERIFY)
        be = _backend(pool, dev, variant, prep=True)
        batch = make_case_batch(pool, rows, case, dev, mirror)
        cap = be.MAX_SEQ_LEN_FOR_CAPTURE
        be._build_forward_metadata(batch, max_seq_len_override=cap)  # row 5 out of the way
        got, _ = _counts(lambda: be._build_forward_metadata(batch, max_seq_len_override=cap))
    assert got == (k("step", CPU) if (variant, mirror) == ("before", False) else {})


# Rows 1, 2 (host lengths) and 9 (pad value when padded) for draft-extend; rows 1, 2, 14 prefill.
EAGER_EXTEND = {
    ("before", True): {},
    ("before", False): RAISES,
    ("after", True): {},
    ("after", False): merged(k(BUILD, ITEM), k(BUILD, TOLIST)),
    ("dropped", True): {},
    ("dropped", False): {},
}


@pytest.mark.parametrize("pad", [0, 2])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mirror", [True, False])
def test_eager_draft_extend(variant, mirror, pad):
    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.DRAFT_EXTEND, ext=(4, 4, 4), pad=pad)
        be = _backend(pool, dev, variant)
        batch = make_case_batch(pool, rows, case, dev, mirror)
        got, _ = _counts(lambda: be.init_forward_metadata(batch))
    expected = EAGER_EXTEND[(variant, mirror)]
    if expected != RAISES and pad and variant != "dropped":
        expected = merged(expected, k(BUILD, ITEM))  # row 9: loop-path pad value
    assert got == expected


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
    assert got == EAGER_EXTEND[(variant, mirror)]
    assert fwd == k("forward", ITEM)  # once per prefill chunk, every variant


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


CAPTURE = merged(k(OUT, ITEM), k(OUT, CPU))  # row 6: seq_lens.sum().item(), seq_lens.cpu()


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
    verify_off = mode is M.TARGET_VERIFY and not prep
    exp_capture = merged(
        CAPTURE,
        k(OUT, H2D) if mode is M.TARGET_VERIFY else {},  # row 5: first verify call
        k(OUT, TOLIST) if verify_off else {},  # row 4
    )
    assert captured == exp_capture
    if variant == "before" and not mirror:
        assert replayed == RAISES  # row 7: the assert on the mirror
        return
    exp_replay = k(OUT, TOLIST) if verify_off else {}
    if mode is M.DRAFT_EXTEND and variant == "after" and not mirror:
        exp_replay = k(OUT, TOLIST)  # row 8: D2H fallback for the host lengths
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
    # row 6 on an idle batch: `seq_lens.cpu()` of no lengths copies zero bytes, which never waits
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
    # Eagerly the first num_steps-1 inner backends each build (row 1 per backend).
    per_backend = EAGER_DECODE[(variant, mirror)]
    exp_eager = (
        RAISES if per_backend == RAISES else {kk: v * (steps - 1) for kk, v in per_backend.items()}
    )
    assert eager == exp_eager
    assert captured == {kk: v * steps for kk, v in CAPTURE.items()}  # every inner backend
    if variant == "before" and not mirror:
        assert replayed == RAISES  # the draft runner passes None for an absent mirror
        return
    assert replayed == {}
    copies = [e for e in led.region_entries if e.region == "step/metadata/copy"]
    assert len(copies) == 2  # backend 0's own copy + one region for steps 1..num_steps-2


# ---- needs_cpu_seq_lens -----------------------------------------------------------------------
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


# ---- where the ledger puts each sync -------------------------------------------------------
def test_sync_locations_name_the_upstream_rows():
    """Every sync is attributed to the function that models its row of section 3."""
    seen: set[tuple[str, str, str]] = set()

    def record(fn):
        _, led = _counts(fn)
        seen.update(
            (e.location.split(":")[0].rsplit("/", 1)[-1], e.function, e.op) for e in led.events
        )

    with emulated_device() as dev:
        pool, rows, case = _world(dev, M.DRAFT_EXTEND, ext=(4, 4, 4), pad=2)
        be = _backend(pool, dev, "after")
        record(lambda: be.init_forward_metadata(make_case_batch(pool, rows, case, dev, False)))
        pool, rows, case = _world(dev, M.TARGET_VERIFY)
        for variant, prep in (("before", True), ("after", False)):
            be = _backend(pool, dev, variant, prep)
            batch = make_case_batch(pool, rows, case, dev, variant == "before")
            record(lambda: be.init_forward_metadata_out_graph(batch, in_capture=True))  # noqa: B023
            record(lambda: be.init_forward_metadata(batch))  # noqa: B023
        nomirror = make_case_batch(pool, rows, case, dev, False)
        be = _backend(pool, dev, "before")
        cap = be.MAX_SEQ_LEN_FOR_CAPTURE
        record(lambda: be._build_forward_metadata(nomirror, max_seq_len_override=cap))
        pool, rows, case = _world(dev, M.EXTEND, ext=(3, 4, 5))
        be = _backend(pool, dev, "after")
        record(
            lambda: be.sparse_prefill_workspace_len_d2h(
                make_case_batch(pool, rows, case, dev, True)
            )
        )
    assert seen == {
        ("variants.py", "max_seq_len_may_d2h", "item"),  # row 1
        ("variants.py", "extend_seq_lens_list_may_d2h", "tolist"),  # row 2
        ("expand.py", "expand_loop_may_d2h", "item"),  # row 9
        ("variants.py", "verify_seq_lens_list_may_d2h", "cpu"),  # row 3 (before)
        ("backend.py", "init_forward_metadata_target_verify", "tolist"),  # row 4
        ("backend.py", "init_forward_metadata_target_verify", "tensor"),  # row 5
        ("backend.py", "_out_graph_build_capture_d2h", "item"),  # row 6
        ("backend.py", "_out_graph_build_capture_d2h", "cpu"),  # row 6
        ("backend.py", "sparse_prefill_workspace_len_d2h", "item"),  # forward time
    }
