"""Producers of the host mirror ``seq_lens_cpu`` (reference section 1), as registered strategies.

| producer     | serving mode                     | syncs per step                                  |
| ------------ | -------------------------------- | ----------------------------------------------- |
| host_known   | no speculative decoding          | 0: the scheduler adds 1 per decode on the host  |
| relay        | EAGLE, overlap scheduler on      | 1 stream synchronize, only when the mirror is wanted |
| blocking     | EAGLE, overlap scheduler off     | 1 blocking ``.to("cpu")``, wanted or not        |
| none         | what-if: no mirror at all        | 0                                               |

"Wanted" is the backend's ``needs_cpu_seq_lens`` (or a what-if override). When the mirror is
not wanted the batch gets ``seq_lens_cpu = None`` and ``seq_lens_sum = None``, as upstream.

The device side of the relay (``LengthRelay``) is sglang's FutureMap length buffer: indexed by
request-pool row, the verify publishes new lengths into it and records an event; the next step
gathers ``seq_lens`` from it on the device and, when the mirror is wanted, pulls the whole
buffer through a private stream into pinned host memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from harness.sync import region


@dataclass(frozen=True)
class Mirror:
    seq_lens_cpu: torch.Tensor | None
    seq_lens_sum: int | None

    @staticmethod
    def absent() -> Mirror:
        return Mirror(None, None)


def _uses_streams(device: torch.device) -> bool:
    # CUDA, or the emulated device (reported as "meta"), whose streams and events are emulated.
    return device.type in ("cuda", "meta")


class LengthRelay:
    """Device buffer of committed lengths by request-pool row ([req_pool_size] int64), the
    publish event, and the pinned host buffer + private stream of the mirror pull."""

    def __init__(self, req_pool_size: int, device: torch.device):
        self.device = device
        self.req_pool_size = req_pool_size
        self.new_seq_lens_buf = torch.zeros(req_pool_size, dtype=torch.int64, device=device)
        self._streams = _uses_streams(device)
        self.pinned: torch.Tensor | None = None
        self.d2h_stream = None
        self.publish_ready = None  # created at the first publish, as upstream

    def _lazy_host_side(self) -> None:
        # Streams and pinned memory are made on first use so a relay built outside the
        # emulated-device context still gets emulated objects when it runs inside it.
        if self.pinned is None:
            self.pinned = torch.empty(self.req_pool_size, dtype=torch.int64, pin_memory=True)
            self.d2h_stream = torch.cuda.Stream()

    def publish(self, req_pool_indices: torch.Tensor, new_seq_lens: torch.Tensor) -> None:
        """Worker side, after verify: scatter the new lengths, then record the ready event."""
        if req_pool_indices.shape[0] == 0:
            return
        self.new_seq_lens_buf[req_pool_indices] = new_seq_lens.to(torch.int64)
        if self._streams:
            if self.publish_ready is None:
                self.publish_ready = torch.cuda.Event()
            self.publish_ready.record()

    def resolve_seq_lens(self, req_pool_indices: torch.Tensor) -> torch.Tensor:
        """Scheduler side: the compute stream waits the publish (a device-side wait, no host
        block) and gathers this batch's lengths on the device."""
        if self._streams and self.publish_ready is not None:
            torch.cuda.current_stream().wait_event(self.publish_ready)
        return self.new_seq_lens_buf[req_pool_indices]

    def pull_mirror_syncs(self, req_pool_indices_cpu: Sequence[int]) -> Mirror:
        """The mirror via the private stream: wait the publish event there, copy the whole
        buffer into pinned memory non-blocking, then synchronize that stream (1 sync)."""
        if not self._streams:  # plain CPU tensors: upstream's non-CUDA bootstrap `.cpu()`
            lens = self.new_seq_lens_buf[list(req_pool_indices_cpu)].cpu()
            return Mirror(lens, int(lens.sum()))
        self._lazy_host_side()
        if self.publish_ready is not None:
            self.d2h_stream.wait_event(self.publish_ready)
        with torch.cuda.stream(self.d2h_stream):
            self.pinned.copy_(self.new_seq_lens_buf, non_blocking=True)
        self.d2h_stream.synchronize()
        lens = self.pinned[list(req_pool_indices_cpu)]  # host gather of host memory
        return Mirror(lens, int(lens.sum()))


@dataclass
class MirrorRequest:
    """What a producer may use for one batch."""

    seq_lens: torch.Tensor  # device lengths of this batch (the truth)
    req_pool_indices_cpu: Sequence[int]
    host_lens: Sequence[int] | None = None  # lengths the host already knows (no speculation)
    relay: LengthRelay | None = None


class MirrorProducer:
    name = "base"

    def produce(self, req: MirrorRequest, want: bool) -> Mirror:  # pragma: no cover - abstract
        raise NotImplementedError


MIRROR_PRODUCERS: dict[str, Callable[[], MirrorProducer]] = {}


def mirror_producer(name: str):
    def wrap(cls: type[MirrorProducer]) -> type[MirrorProducer]:
        cls.name = name
        MIRROR_PRODUCERS[name] = cls
        return cls

    return wrap


def get_mirror_producer(name: str) -> MirrorProducer:
    try:
        return MIRROR_PRODUCERS[name]()
    except KeyError:
        raise ValueError(
            f"unknown mirror producer {name!r}; known: {sorted(MIRROR_PRODUCERS)}"
        ) from None


@mirror_producer("host_known")
class HostKnown(MirrorProducer):
    """No speculation (and every prefill): the host knows every length, the mirror is free."""

    def produce(self, req: MirrorRequest, want: bool) -> Mirror:
        if not want:
            return Mirror.absent()
        assert req.host_lens is not None, "host_known needs the host's lengths"
        with region("scheduler/mirror"):
            lens = torch.tensor(list(req.host_lens), dtype=torch.int64)
            return Mirror(lens, int(sum(req.host_lens)))


@mirror_producer("relay")
class RelayPublish(MirrorProducer):
    """Spec-v2 with the overlap scheduler: pull through the relay only when wanted."""

    def produce(self, req: MirrorRequest, want: bool) -> Mirror:
        if not want:
            return Mirror.absent()
        assert req.relay is not None, "relay producer needs the LengthRelay"
        with region("scheduler/mirror"):
            return req.relay.pull_mirror_syncs(req.req_pool_indices_cpu)


@mirror_producer("blocking")
class BlockingCopy(MirrorProducer):
    """Overlap off: the scheduler copies the new lengths to the host with a blocking
    ``.to("cpu")`` every step, whether or not the backend then gets the mirror."""

    def produce(self, req: MirrorRequest, want: bool) -> Mirror:
        with region("scheduler/mirror"):
            lens = req.seq_lens.to("cpu")  # d2h: the host waits for the verify's result
            if not want:
                return Mirror.absent()
            return Mirror(lens, int(lens.sum()))


@mirror_producer("none")
class NoMirror(MirrorProducer):
    def produce(self, req: MirrorRequest, want: bool) -> Mirror:
        return Mirror.absent()


MIRROR_SETTINGS = ("auto", "present", "absent")


def resolve_want(setting: str, needs_cpu_seq_lens: bool) -> bool:
    """Does the batch get the mirror? ``auto``: the backend's flag, whatever produced it.

    With the flag False the scheduler sets seq_lens_cpu (and seq_lens_sum) to None: since
    #30695 a non-speculative server hands `after` no mirror at all, though the host knows it.
    """
    if setting == "auto":
        return needs_cpu_seq_lens
    if setting == "present":
        return True
    if setting == "absent":
        return False
    raise ValueError(f"unknown mirror setting {setting!r}; known: {MIRROR_SETTINGS}")
