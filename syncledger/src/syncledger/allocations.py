"""How many allocations a device has served in this process, by device kind ("emu", "cuda").

A budgeted test during which the count did not move (and no sync was recorded) never put a
tensor on the device the ledger watches: its budget measured nothing, whatever it says.
"""

from __future__ import annotations

from collections.abc import Callable


def _emulated() -> int:
    from syncledger.emulated import cache

    return cache.allocations()


def _cuda() -> int:
    import torch

    if not torch.cuda.is_initialized():  # nothing was ever allocated, and asking would start it
        return 0
    return sum(
        torch.cuda.memory_stats(i).get("allocation.all.allocated", 0)
        for i in range(torch.cuda.device_count())
    )


COUNTERS: dict[str, Callable[[], int]] = {"emu": _emulated, "cuda": _cuda}


def allocations(kind: str) -> int:
    """Allocations the device of `kind` has made so far (a count that only grows)."""
    return COUNTERS[kind]()
