"""Host time of each region, for the time pass: (region, step, tags, start_ns, end_ns) per exit."""

from __future__ import annotations

from dataclasses import dataclass, field

from syncledger.state import STATE


@dataclass
class RegionTimer:
    """While open, every region exit on this thread appends one raw sample (no statistics)."""

    samples: list[tuple[str, int | None, tuple[tuple[str, str], ...], int, int]] = field(
        default_factory=list
    )

    def __enter__(self) -> RegionTimer:
        STATE.timers.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.timers.remove(self)

    def host_ns_by_region(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for region, _step, _tags, t0, t1 in self.samples:
            out.setdefault(region, []).append(t1 - t0)
        return out


def region_timer() -> RegionTimer:
    return RegionTimer()
