"""Mirror producers: sync count and kind of each under the ledger, on the emulated device."""

from __future__ import annotations

import pytest
import torch

from harness.serving import WorldConfig, build_world
from harness.serving.batch import host_to_device_async
from harness.serving.mirror import (
    MIRROR_PRODUCERS,
    LengthRelay,
    MirrorRequest,
    get_mirror_producer,
    resolve_want,
)
from harness.sync import SyncLedger, emulated_device, host_values, region

ROWS = [3, 1, 5]
LENS = [100, 7, 4000]


def _produce(name: str, want: bool):
    with emulated_device() as dev:
        relay = LengthRelay(8, dev)
        rpi = host_to_device_async(ROWS, torch.int64, dev)
        relay.publish(rpi, host_to_device_async(LENS, torch.int64, dev))
        seq_lens = relay.resolve_seq_lens(rpi)
        req = MirrorRequest(seq_lens, ROWS, host_lens=LENS, relay=relay)
        with SyncLedger() as led, region("step"):
            mirror = get_mirror_producer(name).produce(req, want)
        assert host_values(seq_lens).tolist() == LENS
    return mirror, led


# producer -> (syncs when wanted, syncs when not wanted, kind)
EXPECTED = {
    "host_known": (0, 0, None),
    "relay": (1, 0, "explicit"),
    "blocking": (1, 1, "d2h_read"),
    "none": (0, 0, None),
}


def test_every_producer_is_covered() -> None:
    assert set(EXPECTED) == set(MIRROR_PRODUCERS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("want", [True, False])
def test_producer_syncs_and_values(name: str, want: bool) -> None:
    mirror, led = _produce(name, want)
    n_want, n_not, kind = EXPECTED[name]
    expected = n_want if want else n_not
    assert led.count() == expected, led.format_table()
    if expected:
        assert led.count(kind=kind, region="step/scheduler/mirror") == expected
    if want and name != "none":
        assert mirror.seq_lens_cpu.device.type == "cpu"
        assert mirror.seq_lens_cpu.tolist() == LENS
        assert mirror.seq_lens_sum == sum(LENS)
    else:
        assert mirror.seq_lens_cpu is None and mirror.seq_lens_sum is None


def test_relay_pull_is_a_private_stream_synchronize() -> None:
    _, led = _produce("relay", True)
    (event,) = led.events
    assert event.op == "Stream.synchronize"
    assert event.location.startswith("harness/serving/mirror.py")


def test_resolve_want() -> None:
    assert resolve_want("auto", True) and not resolve_want("auto", False)
    assert resolve_want("present", False) and not resolve_want("absent", True)
    with pytest.raises(ValueError):
        resolve_want("sometimes", True)


def _mirror_syncs_per_decode_step(mode: str, variant: str, mirror: str = "auto") -> list[int]:
    cfg = WorldConfig(
        serving_mode=mode, variant=variant, mirror=mirror, batch_size=3, context_len=1024
    )
    out = []
    with emulated_device() as dev:
        world = build_world(cfg, dev)
        world.warmup_and_capture()
        for _ in range(3):
            with SyncLedger() as led:
                info = world.step()
            assert info.kind == "decode"
            out.append(led.count(region="step/scheduler/mirror"))
            # step-level syncs carry the scheduler batch's mode and the target forward's path
            for e in led.events:
                if e.region == "step/scheduler/mirror":
                    assert e.tag_dict == {"forward_mode": "DECODE", "path": "graph"}
    return out


@pytest.mark.parametrize(
    "mode,variant,mirror,expected",
    [
        ("specv2", "after", "auto", 1),  # after: spec configured -> flag True -> relay pull
        ("specv2", "dropped", "auto", 0),  # flag False: no pull at all
        ("specv2", "dropped", "present", 1),
        ("eagle", "dropped", "auto", 1),  # blocking copy whatever the flag
        ("nonspec", "before", "auto", 0),
    ],
)
def test_world_mirror_syncs_per_step(mode: str, variant: str, mirror: str, expected: int) -> None:
    assert _mirror_syncs_per_decode_step(mode, variant, mirror) == [expected] * 3
