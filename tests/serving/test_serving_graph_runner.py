"""CUDA-graph runner: buckets, padding, capture/replay sequence, eager fallback, stale mirror."""

from __future__ import annotations

import pytest
import torch

from harness.batch.info import ForwardMode, SpecInfo, make_batch
from harness.serving.buckets import capture_buckets, nonspec_buckets, pick_bucket, spec_buckets
from harness.serving.graph_runner import GraphRunner
from harness.serving.section import SpecConfig
from harness.serving.world import build_world
from syncledger import SyncLedger, emulated_device, host_values
from tests.support.serving_worlds import world_config


def test_bucket_lists_match_upstream() -> None:
    ns = nonspec_buckets(256)
    assert ns[:7] == [1, 2, 4, 8, 12, 16, 24] and ns[-1] == 256 and len(ns) == 36
    assert nonspec_buckets(600)[-3:] == [544, 576, 600]  # the maximum is always captured
    assert [b for b in nonspec_buckets(600) if 256 < b < 512][:2] == [272, 288]
    sp = spec_buckets(256)
    assert sp[:10] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12]
    assert [b for b in sp if 32 <= b <= 72] == [32, 40, 44, 48, 52, 56, 60, 64, 72]
    assert sp[-1] == 256 and len(sp) == 51
    assert spec_buckets(300)[-3:] == [272, 288, 300]
    assert spec_buckets(6) == [1, 2, 3, 4, 5, 6]


def test_pick_bucket_and_capture_policies() -> None:
    ns = nonspec_buckets(256)
    assert pick_bucket(ns, 3) == 4 and pick_bucket(ns, 13) == 16 and pick_bucket(ns, 256) == 256
    assert pick_bucket(ns, 257) is None
    assert capture_buckets(False, 256, 64, "all") == ns
    assert capture_buckets(False, 256, 64, "near") == [48, 56, 64]
    assert capture_buckets(True, 256, 300, "near") == [256]
    assert capture_buckets(True, 256, 5, (4, 8, 999)) == [4, 8]


class RecordingBackend:
    """Fake backend: records what the runner hands it (host values only)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def _snap(self, batch):
        cpu = None if batch.seq_lens_cpu is None else batch.seq_lens_cpu.tolist()
        return (
            batch.batch_size,
            host_values(batch.seq_lens).tolist(),
            host_values(batch.req_pool_indices).tolist(),
            host_values(batch.out_cache_loc).tolist(),
            cpu,
            batch.seq_lens_sum,
        )

    def init_forward_metadata(self, batch) -> None:
        self.calls.append(("eager", *self._snap(batch)))

    def init_forward_metadata_out_graph(self, batch, in_capture: bool) -> None:
        self.calls.append(("capture" if in_capture else "out_graph", *self._snap(batch)))

    def init_forward_metadata_in_graph(self, batch) -> None:
        self.calls.append(("in_graph", batch.batch_size))


def _runner(dev, mode=ForwardMode.DECODE, absent="stale_buffer", buckets=(1, 2, 4)):
    backend = RecordingBackend()
    runner = GraphRunner(
        "t", backend, mode, list(buckets), 2, dev, forward=lambda: None,
        spec=SpecInfo(), mirror_when_absent=absent,
    )  # fmt: skip
    return runner, backend


def _batch(dev, lens, mirror=True):
    rows = list(range(1, len(lens) + 1))
    out = [10 * r + k for r in rows for k in range(2)]
    return make_batch(
        ForwardMode.DECODE, seq_lens=lens, req_pool_indices=rows, out_cache_loc=out,
        device=dev, mirror=mirror,
    )  # fmt: skip


def test_capture_then_replay_sequence_and_padding() -> None:
    with emulated_device() as dev:
        runner, backend = _runner(dev)
        runner.capture()
        kinds = [c[0] for c in backend.calls]
        # largest first; per bucket: out_graph in capture mode, then warm-up of the body x2
        assert kinds == ["capture", "in_graph", "in_graph"] * 3
        assert [c[1] for c in backend.calls if c[0] == "capture"] == [4, 2, 1]
        backend.calls.clear()
        rec = runner.run(_batch(dev, [50, 60, 70]))
        assert (rec.path, rec.batch_size, rec.bucket) == ("graph", 3, 4)
        (out, inner) = backend.calls
        assert out[0] == "out_graph" and inner == ("in_graph", 4)
        _, bs, seq, rpi, loc, cpu, total = out
        assert bs == 4
        assert seq == [50, 60, 70, 1] and rpi == [1, 2, 3, 0]
        assert loc == [10, 11, 20, 21, 30, 31, 0, 0]
        assert cpu == [50, 60, 70, 1] and total == 50 + 60 + 70 + 1


def test_mirror_absent_stale_buffer_vs_none() -> None:
    with emulated_device() as dev:
        runner, backend = _runner(dev)
        runner.capture()
        runner.run(_batch(dev, [50, 60]))
        backend.calls.clear()
        rec = runner.run(_batch(dev, [51, 61], mirror=False))
        cpu = backend.calls[0][5]
        assert cpu == [50, 60]  # not refreshed: the previous step's lengths
        assert rec.host_lens_used.tolist() == [50, 60]
        draft, dbackend = _runner(dev, absent="none")
        draft.capture()
        dbackend.calls.clear()
        rec = draft.run(_batch(dev, [51, 61], mirror=False))
        assert dbackend.calls[0][5] is None and rec.host_lens_used is None


def test_eager_above_largest_bucket() -> None:
    with emulated_device() as dev:
        runner, backend = _runner(dev, buckets=(1, 2))
        runner.capture()
        backend.calls.clear()
        rec = runner.run(_batch(dev, [5, 6, 7]))
        assert (rec.path, rec.bucket) == ("eager", None)
        assert [c[0] for c in backend.calls] == ["eager"]


def _world(mode: str, variant: str = "after", mirror: str = "auto", **kw):
    bs = kw.pop("batch_size", 3)
    return world_config(mode, variant, mirror, bs, seed=11, context_len=1024, **kw)


@pytest.mark.parametrize("mode", ["nonspec", "specv2"])
def test_replay_makes_no_sync_in_graph_paths(mode: str) -> None:
    with emulated_device() as dev:
        world = build_world(_world(mode, "dropped"), dev)
        world.warmup_and_capture()
        with SyncLedger() as led:
            for _ in range(3):
                info = world.step()
                paths = {p.path for p in info.passes if p.forward_mode != "DRAFT_EXTEND"}
                assert paths == {"graph"}
        # the serving stack's small pageable copies are hazards, not syncs; the scheduler's
        # wait for a step's results is the step's, not the replay's (with the overlap
        # scheduler each step waits for the one before: 2 of 3 steps)
        readback = "step/scheduler/process_result"
        graph = [
            e
            for e in led.events
            if e.tag_dict.get("path") == "graph" and e.kind.is_sync and e.region != readback
        ]
        assert graph == [], led.format_table()
        assert led.count(region=readback) == 2
        assert led.count(region="step/metadata/in_graph") == 0
        entries = {e.region for e in led.region_entries if dict(e.tags).get("path") == "graph"}
        assert "step/metadata/in_graph" in entries and "step/metadata/out_graph" in entries


def test_world_eager_fallback_above_max_bucket() -> None:
    with emulated_device() as dev:
        world = build_world(_world("nonspec", batch_size=5, cuda_graph_max_bs=4), dev)
        world.warmup_and_capture()
        info = world.step()
        assert [(p.path, p.bucket) for p in info.passes] == [("eager", None)]


@pytest.mark.parametrize("speculative", [False, True])
def test_stale_mirror_finding(speculative: bool) -> None:
    """Driven directly without the mirror, the decode / verify runner hands `after` its own
    host buffer, never refreshed: stale lengths. Serving never gets there."""
    mode = "TARGET_VERIFY" if speculative else "DECODE"
    with emulated_device() as dev:
        for mirror, expect in (("absent", True), ("present", False)):
            spec = SpecConfig() if speculative else None
            world = build_world(_world("direct", "after", mirror, spec=spec), dev)
            world.warmup_and_capture()
            for _ in range(3):
                world.step()
            stale = [f for f in world.findings if f.kind == "stale_mirror"]
            assert bool(stale) is expect, (mirror, world.findings)
            for f in stale:
                assert f.path == "graph" and f.rows_differ > 0 and f.max_abs_diff > 0
                assert f.forward_mode == mode


def test_gpucheck_logic_on_cpu() -> None:
    """The GPU check's comparison, run with the plain CPU device standing in for CUDA."""
    from harness.checks import serving_gpu as gpucheck

    assert gpucheck.buckets_used(False, [8, 64, 300]) == [8, 48, 56, 64, 256]
    assert gpucheck.buckets_used(True, [4, 32, 300]) == [3, 4, 24, 26, 28, 30, 32, 256]
    for mode in ("nonspec", "specv2"):
        row = gpucheck.check_bucket(mode, 4, "flash", 3, device=torch.device("cpu"))
        assert row["ok"], row
        assert row["reference"] == "emulated" and row["raw_bs"] == 3 and row["fields"] > 10
