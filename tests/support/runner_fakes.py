"""A small stand-in for harness.serving's world, so the runner's tests need no backend."""

from __future__ import annotations

import os
import time

import torch

from syncledger import region, tags

EAGER_ABOVE = 16


class FakeWorld:
    """Decode steps with a known sync pattern:
    - capture: one `.item()` in step/metadata/out_graph (path capture);
    - every step: `before` reads the lengths back in step/scheduler/mirror (one D2H);
    - eager steps (batch > 16) read a max in step/metadata/eager (one D2H);
    - `before` with the mirror absent fails at its first step (AssertionError)."""

    extra_sync = False  # tests flip this to plant a sync
    broken_variant = ""  # tests set this to make a variant's cells fail
    spin = ("", 0.0)  # (variant, µs): tests plant host time in one variant's steps
    after_spin = None  # a test's callable, run at the end of the forward region

    def __init__(self, sc, cell, device: torch.device):
        self.cell = cell
        self.findings: list[dict] = []
        self.seq_lens = torch.full((cell.batch_size,), 10, device=device)
        self.i = 0

    def warmup_and_capture(self) -> None:
        with (
            tags(forward_mode="DECODE", path="capture"),
            region("step"),
            region("metadata", "out_graph"),
        ):
            self.seq_lens.sum().item()

    def step(self) -> int:
        eager = self.cell.batch_size > EAGER_ABOVE
        with tags(forward_mode="DECODE", path="eager" if eager else "graph"), region("step"):
            with region("scheduler", "mirror"):
                if self.cell.variant == "before":
                    self.seq_lens.cpu()
            if self.cell.variant == FakeWorld.broken_variant:
                raise RuntimeError("broken on purpose")
            if self.cell.variant == "before" and self.cell.mirror == "absent":
                assert_mirror(None)
            with region("metadata", "eager" if eager else "out_graph"):
                if eager:
                    self.seq_lens.max().item()
                if FakeWorld.extra_sync:
                    planted_sync(self.seq_lens)
                self.seq_lens.add_(1)
            with region("forward"):
                if self.cell.variant == FakeWorld.spin[0]:
                    spin_us(FakeWorld.spin[1])
                if FakeWorld.after_spin is not None:
                    FakeWorld.after_spin()
        if self.i == 3:
            self.findings.append(
                {"kind": "stale_mirror", "step": self.i, "detail": "host 10 != 13"}
            )
        self.i += 1
        return self.i


def spin_us(us: float) -> None:
    end = time.perf_counter_ns() + int(us * 1e3)
    while time.perf_counter_ns() < end:
        pass


def assert_mirror(mirror) -> None:
    assert mirror is not None, "seq_lens_cpu is required"


def planted_sync(t: torch.Tensor) -> None:
    t[0].item()  # PLANTED


def fake_builder(sc, cell, device):
    return FakeWorld(sc, cell, device)


def pid_builder(sc, cell, device):
    """A FakeWorld whose finding names the process that built it, and what it sees of
    FakeWorld.spin (a class attribute a forked process would inherit from its parent)."""
    world = FakeWorld(sc, cell, device)
    world.findings.append({"kind": "pid", "detail": f"{os.getpid()} {FakeWorld.spin!r}"})
    return world


def dying_builder(sc, cell, device):
    """A world whose process dies at once, as one killed or out of memory does."""
    os._exit(7)
