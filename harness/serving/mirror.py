"""The host mirror ``seq_lens_cpu``: how each serving mode produces it, and the relay.

Upstream (sglang a36c8731 / 504570f4 / a9cf5e68), per serving mode:

| serving mode                  | where the host gets seq_lens                         | syncs per step |
| ----------------------------- | ---------------------------------------------------- | -------------- |
| no speculative decoding       | the scheduler knows them (adds 1 per decode)         | 0              |
| EAGLE, overlap scheduler off  | ``new_seq_lens.to("cpu")`` after every step (S03)    | 1, always      |
| EAGLE, overlap on ("spec-v2") | the relay, for decode batches only (S01)             | 1 when wanted  |

Prefill batches always carry the lengths the scheduler knows. The backends' flag
``needs_cpu_seq_lens`` has one consumer: the spec-v2 relay (``FutureMap.resolve_seq_lens_cpu``),
which for a decode batch with the flag False sets ``seq_lens_cpu`` and ``seq_lens_sum`` to None.

``LengthRelay`` is the device side of that relay (the FutureMap length buffer): indexed by
request-pool row, the worker publishes new lengths into it and records an event; the next
decode gathers ``seq_lens`` from it on the device and, when the mirror is wanted, pulls the
whole buffer through a private stream into pinned host memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from syncledger import region


@dataclass(frozen=True)
class Mirror:
    seq_lens_cpu: torch.Tensor | None
    seq_lens_sum: int | None

    @staticmethod
    def absent() -> Mirror:
        return Mirror(None, None)

    @staticmethod
    def of_host(lens: Sequence[int]) -> Mirror:
        """Lengths the host already knows (a host op, no sync)."""
        host = torch.tensor(list(lens), dtype=torch.int64)
        return Mirror(host, int(sum(lens)))

    def shifted(self, by: int) -> Mirror:
        """The same mirror with every length grown by ``by`` (host ops)."""
        if self.seq_lens_cpu is None:
            return self
        bs = int(self.seq_lens_cpu.shape[0])
        return Mirror(self.seq_lens_cpu + by, self.seq_lens_sum + by * bs)


def host_known_mirror(lens: Sequence[int]) -> Mirror:
    """The scheduler's own lengths handed to the batch (no speculation, every prefill)."""
    with region("scheduler", "mirror"):
        return Mirror.of_host(lens)


def blocking_copy_d2h(new_seq_lens: torch.Tensor) -> list[int]:
    """Overlap scheduler off: after every speculative step, decode and prefill, the scheduler
    copies the new lengths to the host with a blocking ``.to("cpu")`` (S03)."""
    with region("scheduler", "mirror"):
        return new_seq_lens.to("cpu").tolist()  # fidelity: S03


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

    def _host_side(self) -> bool:
        """The pinned buffer and private stream exist on CUDA only (elsewhere upstream takes
        the plain ``.cpu()`` path). Made on first use, so that a relay built outside the
        emulated-device context still gets emulated objects when it runs inside it."""
        if self._streams and self.pinned is None:
            self.pinned = torch.empty(self.req_pool_size, dtype=torch.int64, pin_memory=True)
            self.d2h_stream = torch.cuda.Stream()
        return self._streams

    def publish(self, req_pool_indices: torch.Tensor, new_seq_lens: torch.Tensor) -> None:
        """Worker side (``on_publish``): scatter the new lengths, then record the ready event,
        chained after the previous one (device-side waits, no host block)."""
        if req_pool_indices.shape[0] == 0:
            return
        self.new_seq_lens_buf[req_pool_indices] = new_seq_lens.to(torch.int64)
        if self._streams:
            if self.publish_ready is None:
                self.publish_ready = torch.cuda.Event()
            else:
                torch.cuda.current_stream().wait_event(self.publish_ready)
            self.publish_ready.record()

    def resolve_seq_lens(self, req_pool_indices: torch.Tensor) -> torch.Tensor:
        """Scheduler side: the compute stream waits the publish (a device-side wait, no host
        block) and gathers this batch's lengths on the device."""
        if self._streams and self.publish_ready is not None:
            torch.cuda.current_stream().wait_event(self.publish_ready)
        return self.new_seq_lens_buf[req_pool_indices]

    def pull_mirror_syncs(self, seq_lens: torch.Tensor, rows: Sequence[int]) -> Mirror:
        """The mirror of a decode batch whose backends want it: wait the publish event on the
        private stream, copy the whole buffer into pinned memory non-blocking, then
        synchronize that stream (S01). Before any publish, or off CUDA, the batch's lengths
        are copied with ``.cpu()`` instead (S02; on CUDA every decode follows a publish)."""
        with region("scheduler", "mirror"):
            if not self._host_side() or self.publish_ready is None:
                lens = seq_lens.cpu()  # fidelity: S02
                return Mirror(lens, int(lens.sum()))
            self.d2h_stream.wait_event(self.publish_ready)
            with torch.cuda.stream(self.d2h_stream):
                self.pinned.copy_(self.new_seq_lens_buf, non_blocking=True)
            self.d2h_stream.synchronize()  # fidelity: S01
            lens = self.pinned[list(rows)]  # host gather of host memory
            return Mirror(lens, int(lens.sum()))
