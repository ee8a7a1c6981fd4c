"""The whole world: every serving mode x variant runs, stays consistent with its oracle."""

from __future__ import annotations

import pytest

from harness.serving.modes import SERVING_MODES
from harness.serving.section import SpecConfig
from harness.serving.world import WorldConfig, build_world
from syncledger import SyncLedger, emulated_device, host_values
from tests.support.serving_worlds import world_config

VARIANTS = ("before", "after", "dropped")
STEPS = 7


def _cfg(mode: str, variant: str, **kw) -> WorldConfig:
    base = dict(
        batch_size=3, context_len=1024, seed=5, prefill_every=3, prompt_len=(16, 48),
        mirror="present" if mode == "direct" else "auto",
        spec=SpecConfig() if mode == "direct" else None,
    )  # fmt: skip
    base.update(kw)
    return world_config(mode, variant, **base)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", sorted(SERVING_MODES))
def test_world_runs_every_mode_and_variant(mode: str, variant: str) -> None:
    with emulated_device() as dev:
        world = build_world(_cfg(mode, variant), dev)
        world.warmup_and_capture()
        with SyncLedger() as led:
            infos = [world.step() for _ in range(STEPS)]
        assert [i.step for i in infos] == list(range(STEPS))
        kinds = [i.kind for i in infos]
        assert kinds.count("prefill") == 2  # steps 2 and 5
        for info in infos:
            modes = [p.forward_mode for p in info.passes]
            if info.kind == "prefill":
                assert set(modes) == {"EXTEND"}
                assert len(modes) == (1 if mode == "nonspec" else 2)
            elif mode == "nonspec":
                assert modes == ["DECODE"]
            else:
                assert modes == ["DECODE", "TARGET_VERIFY", "DRAFT_EXTEND"]
                # draft-extend replays a graph from a9cf5e68 on (PR #30853)
                extend = "graph" if variant == "dropped" else "eager"
                assert [p.path for p in info.passes] == ["graph", "graph", extend]
        assert led.count(region="step/metadata/in_graph") == 0  # graph bodies never sync
        assert led.count(region="step/graph") == 0
        # every event belongs to a step and lies under region "step"
        assert all(e.step is not None and e.region.startswith("step") for e in led.events)
        # pass events carry forward_mode and path tags
        for e in led.events:
            if not e.region.startswith("step/scheduler"):
                assert {"forward_mode", "path"} <= set(e.tag_dict), e.describe()
        if world.relay is not None:  # the device's lengths agree with the oracle
            buf = host_values(world.relay.new_seq_lens_buf).tolist()
            for row, n in world.scheduler.lengths().items():
                assert buf[row] == n
        # serving hands every batch the mirror it reads: nothing stale
        assert world.findings == []


def test_world_is_deterministic() -> None:
    runs = []
    for _ in range(2):
        with emulated_device() as dev:
            world = build_world(_cfg("specv2", "after"), dev)
            world.warmup_and_capture()
            runs.append(([world.step() for _ in range(5)], world.scheduler.lengths()))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("bs", [3, 12])  # graph, eager (largest bucket 8)
@pytest.mark.parametrize(
    "variant,error", [("before", AssertionError), ("after", AttributeError), ("dropped", None)]
)
def test_specv2_without_the_mirror_fails_like_upstream(variant: str, error, bs: int) -> None:
    """`before` asserts the mirror in the draft pass; `after` survives the draft pass, then the
    worker reads `attn_backend.max_context_len`, which the backend lacks before a9cf5e68."""
    cfg = _cfg(
        "specv2", variant, mirror="absent", prefill_every=0, batch_size=bs, cuda_graph_max_bs=8
    )
    with emulated_device() as dev:
        world = build_world(cfg, dev)
        world.warmup_and_capture()
        if error is None:
            world.step()
            return
        with pytest.raises(error) as info:
            world.step()
    frames = [f.name for f in info.traceback]
    assert ("size_tree_mask_from_backend" in frames) == (variant == "after")


def test_direct_without_the_mirror_shows_the_stale_runner_buffer() -> None:
    """Driven directly, `after` survives without the mirror; the verify graph runner then hands
    it its own host buffer, stale from capture (as upstream)."""
    with emulated_device() as dev:
        world = build_world(_cfg("direct", "after", mirror="absent", prefill_every=0), dev)
        world.warmup_and_capture()
        for _ in range(3):
            world.step()
        stale = {(f.forward_mode, f.path) for f in world.findings}
    assert stale == {("TARGET_VERIFY", "graph")}


def test_step_before_capture_is_an_error() -> None:
    with emulated_device() as dev:
        world = build_world(_cfg("nonspec", "after"), dev)
        with pytest.raises(RuntimeError):
            world.step()


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        _cfg("turbo", "after")
    with pytest.raises(ValueError):
        _cfg("eagle", "after", spec=SpecConfig(draft_tokens=5))
    with pytest.raises(ValueError):
        _cfg("eagle", "after", mirror="maybe")
    with pytest.raises(ValueError):
        _cfg("eagle", "after", mirror="absent")  # overlap off never withholds the mirror


def test_mirror_buckets_and_standin_is_a_noop_off_cuda() -> None:
    with emulated_device() as dev:
        world = build_world(_cfg("specv2", "dropped"), dev)
        world.warmup_and_capture()
        assert world.needs_cpu_seq_lens is False and world.decode_mirror == "absent"
        buckets = {k: list(r.buckets) for k, r in world.runners.items()}
        assert buckets == {"draft": [2, 3], "verify": [2, 3], "draft_extend": [2, 3]}
        assert world.standin.units == 0 and world.standin.measure_us() == 0.0


def test_the_vocabulary_names_the_backends_variants_in_their_order() -> None:
    """The serving world's reading order of variants (for the report) is the declared one, the
    backend implements each, and the fidelity table has a commit of each."""
    from harness.backend import POLICIES
    from harness.fidelity import load_table
    from harness.serving.vocabulary import serving_vocabulary
    from harness.variants import variant_names

    vocabulary = serving_vocabulary()
    assert (
        list(vocabulary.variants) == variant_names() == list(load_table().commits) == list(POLICIES)
    )
    assert vocabulary.variants[0] == vocabulary.reference
