"""CUDA-graph batch-size buckets and padding, as sglang's server args generate them.

No speculative decoding: ``[1, 2, 4, 8, 12]``, then 16..256 step 8, 272..511 step 16, 512.. step 32.
Speculative decoding (more buckets at small sizes, where padding costs most):
1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8, 272.. step 16.
Both lists are cut at the configured maximum, and the maximum itself is always captured
(sglang appends it when the spacing skips it).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import torch

DEFAULT_MAX_BS = 256


def nonspec_buckets(max_bs: int = DEFAULT_MAX_BS) -> list[int]:
    values = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    return _cap(values, max_bs)


def spec_buckets(max_bs: int = DEFAULT_MAX_BS) -> list[int]:
    values = [
        *range(1, 9),
        *range(10, 33, 2),
        *range(40, 65, 4),
        *range(72, 257, 8),
        *range(272, max_bs + 1, 16),
    ]
    return _cap(values, max_bs)


def _cap(values: Sequence[int], max_bs: int) -> list[int]:
    if max_bs < 1:
        raise ValueError(f"max_bs must be >= 1, got {max_bs}")
    out = sorted({v for v in values if v <= max_bs} | {max_bs})
    return out


def bucket_lists(spec: bool, max_bs: int = DEFAULT_MAX_BS) -> list[int]:
    return spec_buckets(max_bs) if spec else nonspec_buckets(max_bs)


CAPTURE_POLICIES = ("all", "near")


def capture_buckets(
    spec: bool, max_bs: int, batch_size: int, policy: str | tuple[int, ...] = "near"
) -> list[int]:
    """Buckets a run captures.

    ``all``: every bucket up to ``max_bs`` (upstream). ``near``: only those a run of about
    ``batch_size`` replays, from the bucket of ``3/4 batch_size`` to that of ``batch_size``
    (only the largest when the batch is above it): replays pick the same graph path, capture
    stays cheap on the emulated device. A tuple names the buckets (GPU checks)."""
    full = bucket_lists(spec, max_bs)
    if isinstance(policy, tuple):
        return sorted(b for b in set(policy) if b <= max_bs)
    if policy == "all":
        return full
    if policy != "near":
        raise ValueError(f"unknown capture policy {policy!r}; known: {CAPTURE_POLICIES}")
    hi = pick_bucket(full, batch_size)
    if hi is None:  # the batch runs eagerly; a shrunken one replays the largest graph
        return [full[-1]]
    lo = pick_bucket(full, max(1, (3 * batch_size) // 4))
    return [b for b in full if lo <= b <= hi]


def pick_bucket(buckets: Sequence[int], batch_size: int) -> int | None:
    """Smallest captured size >= batch_size, or None when the batch must run eagerly."""
    i = bisect.bisect_left(buckets, batch_size)
    return buckets[i] if i < len(buckets) else None


# Padding rules of the decode / verify runner: padded rows read request row 0 (the reserved
# padding row), length 1, and write their KV to slot 0 (the reserved page).
PAD_SEQ_LEN = 1
PAD_REQ_POOL_INDEX = 0
PAD_OUT_CACHE_LOC = 0


def pad_rows(src: torch.Tensor, dst: torch.Tensor, fill: int) -> None:
    """Copy ``src`` into the head of the static buffer ``dst`` and fill the tail with ``fill``.

    Both stay on the device (a device-to-device copy and a fill): no sync."""
    n = src.shape[0]
    if n < dst.shape[0]:
        dst[n:].fill_(fill)
    dst[:n].copy_(src)
