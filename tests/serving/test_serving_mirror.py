"""The host mirror: who produces it in each serving mode, and what it costs (emulated device)."""

from __future__ import annotations

import pytest
import torch

from harness.batch.info import host_to_device_async
from harness.serving.mirror import LengthRelay, blocking_copy_d2h, host_known_mirror
from harness.serving.world import WorldConfig, build_world
from syncledger import SyncLedger, emulated_device, host_values, region
from tests.support.serving_worlds import world_config

ROWS = [3, 1, 5]
LENS = [100, 7, 4000]


def _relay(dev, publish: bool = True) -> tuple[LengthRelay, torch.Tensor]:
    relay = LengthRelay(8, dev)
    rpi = host_to_device_async(ROWS, torch.int64, dev)
    if publish:
        relay.publish(rpi, host_to_device_async(LENS, torch.int64, dev))
    return relay, relay.resolve_seq_lens(rpi)


def test_relay_pull_is_one_private_stream_synchronize() -> None:
    with emulated_device() as dev:
        relay, seq_lens = _relay(dev)
        with SyncLedger() as led, region("step"):
            mirror = relay.pull_mirror_syncs(seq_lens, ROWS)
        assert host_values(seq_lens).tolist() == LENS
    (event,) = led.events
    assert (event.kind.value, event.op, event.region) == (
        "explicit",
        "Stream.synchronize",
        "step/scheduler/mirror",
    )
    assert mirror.seq_lens_cpu.tolist() == LENS and mirror.seq_lens_sum == sum(LENS)


def test_relay_bootstraps_with_a_device_read_before_any_publish() -> None:
    with emulated_device() as dev:
        relay, seq_lens = _relay(dev, publish=False)
        with SyncLedger() as led, region("step"):
            relay.pull_mirror_syncs(seq_lens, ROWS)
    (event,) = led.events
    assert (event.kind.value, event.op) == ("d2h_read", "cpu")


def test_blocking_copy_and_host_known() -> None:
    with emulated_device() as dev:
        lens = host_to_device_async(LENS, torch.int64, dev)
        with SyncLedger() as led, region("step"):
            copied = blocking_copy_d2h(lens)
            host = host_known_mirror(LENS)
    assert copied == LENS and host.seq_lens_cpu.tolist() == LENS
    (event,) = led.events
    assert (event.kind.value, event.op, event.region) == ("d2h_read", "to", "step/scheduler/mirror")


def _cfg(mode: str, variant: str, mirror: str, prefill_every: int) -> WorldConfig:
    return world_config(
        mode, variant, mirror, 3, context_len=1024, prefill_every=prefill_every,
        prompt_len=(16, 48),
    )  # fmt: skip


def _mirror_syncs_per_step(mode: str, variant: str, mirror: str = "auto") -> list[tuple]:
    cfg = _cfg(mode, variant, mirror, prefill_every=3)
    out = []
    with emulated_device() as dev:
        world = build_world(cfg, dev)
        world.warmup_and_capture()
        for _ in range(6):
            with SyncLedger() as led:
                info = world.step()
            out.append((info.kind, led.count(region="step/scheduler/mirror")))
            for e in led.events:  # step-level syncs carry the scheduler batch's mode
                if e.region == "step/scheduler/mirror":
                    want = "EXTEND" if info.kind == "prefill" else "DECODE"
                    assert e.tag_dict["forward_mode"] == want
    return out


D, P = "decode", "prefill"


@pytest.mark.parametrize(
    "mode,variant,mirror,per_step",
    [
        # the flag's one consumer: the spec-v2 relay, decode batches only
        ("specv2", "before", "auto", {D: 1, P: 0}),
        ("specv2", "after", "auto", {D: 1, P: 0}),
        ("specv2", "dropped", "auto", {D: 0, P: 0}),
        ("specv2", "dropped", "present", {D: 1, P: 0}),
        # overlap off: a blocking copy after every step, decode and prefill, whatever the flag
        ("eagle", "dropped", "auto", {D: 1, P: 1}),
        ("eagle", "after", "auto", {D: 1, P: 1}),
        # no speculation: the host knows the lengths
        ("nonspec", "after", "auto", {D: 0, P: 0}),
        ("direct", "after", "present", {D: 0, P: 0}),
    ],
)
def test_world_mirror_syncs_per_step(mode: str, variant: str, mirror: str, per_step) -> None:
    steps = _mirror_syncs_per_step(mode, variant, mirror)
    assert {k for k, _ in steps} == {D, P}
    assert steps == [(kind, per_step[kind]) for kind, _ in steps]


@pytest.mark.parametrize("mode", ["nonspec", "eagle", "specv2"])
@pytest.mark.parametrize("variant", ["after", "dropped"])
def test_prefill_batches_always_carry_the_mirror(mode: str, variant: str) -> None:
    cfg = _cfg(mode, variant, "absent" if mode == "specv2" else "auto", prefill_every=1)
    seen = []
    with emulated_device() as dev:
        world = build_world(cfg, dev)
        original = world.target_backend.init_forward_metadata

        def spy(batch):
            seen.append(batch.seq_lens_cpu is not None)
            return original(batch)

        world.target_backend.init_forward_metadata = spy
        world.warmup_and_capture()
        infos = [world.step() for _ in range(2)]
    assert [i.kind for i in infos] == ["prefill", "prefill"] and seen == [True, True]


@pytest.mark.parametrize(
    "mode,mirror",
    [("nonspec", "absent"), ("eagle", "present"), ("direct", "auto"), ("specv2", "maybe")],
)
def test_mirror_settings_a_mode_has_no_switch_for_are_refused(mode: str, mirror: str) -> None:
    with pytest.raises(ValueError, match="mirror"):
        world_config(mode, mirror=mirror)
