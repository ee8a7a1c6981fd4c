"""Findings: correctness hazards the world detects while it runs (not syncs, not timings).

``stale_mirror``: the host lengths a forward pass handed the backend differ from the device's
truth. It happens on the CUDA-graph path when the batch has no mirror: the runner's host
buffer keeps lengths from an earlier step. The truth comes from the scheduler (the simulator's
oracle), so detecting it never reads the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class Finding:
    kind: str
    step: int
    forward_mode: str
    path: str
    batch_size: int
    rows_differ: int
    max_abs_diff: int
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def check_stale_mirror(
    host_lens_used: torch.Tensor | None,
    truth: Sequence[int],
    *,
    step: int,
    forward_mode: str,
    path: str,
) -> Finding | None:
    """Compare the host lengths a pass used with the true lengths (host values only)."""
    if host_lens_used is None:
        return None
    used = host_lens_used.tolist()  # a host tensor: no device involved
    assert len(used) == len(truth), (len(used), len(truth))
    diffs = [abs(int(u) - int(t)) for u, t in zip(used, truth)]
    rows = sum(1 for d in diffs if d)
    if not rows:
        return None
    return Finding(
        kind="stale_mirror",
        step=step,
        forward_mode=forward_mode,
        path=path,
        batch_size=len(truth),
        rows_differ=rows,
        max_abs_diff=max(diffs),
        detail=(
            f"{forward_mode} {path}: host seq_lens differ from the device in {rows}/{len(truth)} "
            f"rows (max |diff| {max(diffs)}): the backend was given a stale mirror"
        ),
    )
