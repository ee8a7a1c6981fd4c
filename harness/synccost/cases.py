"""The experiment's cases: which sync is injected, how many per step, at which forward duration.

A case is written into the result tables' `case` column as its label, e.g.
`item k=2 fwd=1000us`, and the report reads the case back from the label alone (no torch, no
meta.json needed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# injected sync -> the ledger kind the count pass must record it as
INJECTIONS: dict[str, str] = {
    "item": "d2h_read",  # `.item()` of a value computed on the device
    "stream_sync": "explicit",  # the current stream's synchronize()
    "blocking_copy": "h2d_blocking",  # a blocking copy from pageable host memory
}
NO_SYNC = "none"  # the k = 0 case, shared by every kind at one forward duration

_LABEL = re.compile(r"^(?P<kind>\S+) k=(?P<k>\d+) fwd=(?P<fwd>[0-9.e+]+)us$")


@dataclass(frozen=True)
class SyncCostCase:
    kind: str  # an INJECTIONS name, or NO_SYNC when k == 0
    k: int  # injected syncs per step
    forward_us: float  # stand-in forward duration, µs

    @property
    def label(self) -> str:
        return f"{self.kind} k={self.k} fwd={self.forward_us:g}us"


def parse_case(label: str) -> SyncCostCase | None:
    """The case a label names; None for any other label."""
    m = _LABEL.match(str(label))
    if m is None:
        return None
    return SyncCostCase(m["kind"], int(m["k"]), float(m["fwd"]))


def enumerate_cases(
    kinds: Iterable[str], ks: Iterable[int], forward_us: Iterable[float]
) -> list[SyncCostCase]:
    """Every case, forward duration outermost; k = 0 once per duration (no kind to inject)."""
    kinds, ks = list(kinds), sorted(set(ks))
    out = []
    for fwd in forward_us:
        if 0 in ks:
            out.append(SyncCostCase(NO_SYNC, 0, float(fwd)))
        out.extend(SyncCostCase(kind, k, float(fwd)) for kind in kinds for k in ks if k)
    return out
