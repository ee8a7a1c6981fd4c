"""`region(name)`: one call marks a region for NVTX, the ledger and (when recording) the profiler."""

from __future__ import annotations

from time import perf_counter_ns

import torch

from syncledger import nvtx_ranges
from syncledger.events import RegionEntry
from syncledger.state import PROCESS_LEDGERS, STATE

_profiler_enabled = torch._C._autograd._profiler_enabled
_tuple = tuple.__new__


_PUSH, _POP, _MARKS = nvtx_ranges.PUSH, nvtx_ranges.POP, nvtx_ranges.MARKS


class region:
    """Mark a named region; regions nest and their paths join with '/'. A name is one
    component of that path: `region("scheduler", "prepare")` is one region two levels down
    (one NVTX range, one ledger entry), `region("scheduler/prepare")` is refused.

    Cost with no ledger, timer or profiler active: one NVTX push/pop (none where no NVTX tool
    is attached) and a list push/pop.
    The profiler does not see NVTX ranges, so a `record_function` label is added only while
    a PyTorch profiler is recording (entering one costs ~6 µs even with no profiler).
    """

    __slots__ = ("_extra", "_regions", "name", "path")

    def __init__(self, *names: str) -> None:
        if len(names) == 1:  # the common case, checked without a loop
            name = names[0]
            if type(name) is not str or not name or "/" in name:
                _refuse(name)
            self.name = name
        else:
            if not names:
                raise TypeError("region() needs a name, e.g. region('metadata')")
            for name in names:
                if not isinstance(name, str) or not name or "/" in name:
                    _refuse(name)
            self.name = "/".join(names)
        # (profiler label or None, start ns or 0) while a profiler or a timer is on, else None
        self._extra: tuple[object | None, int] | None = None

    def __enter__(self) -> region:
        st = STATE
        regions = self._regions = st.regions
        path = self.path = regions[-1] + "/" + self.name if regions else self.name
        regions.append(path)
        if _MARKS:
            _PUSH(path)
        mine = st.ledgers
        if mine or PROCESS_LEDGERS:
            entry = _tuple(RegionEntry, (path, st.step, st.tags))  # RegionEntry(...), one call less
            for ledger in mine:
                ledger.region_entries.append(entry)
            for ledger in PROCESS_LEDGERS:
                ledger.region_entries.append(entry)
        if _profiler_enabled() or st.timers:
            self._extra = self._labelled_and_timed(path, st.timers)
        return self

    def _labelled_and_timed(self, path: str, timers: list[object]) -> tuple[object | None, int]:
        label = None
        if _profiler_enabled():
            label = torch.profiler.record_function(path)
            label.__enter__()
        return label, perf_counter_ns() if timers else 0

    def __exit__(self, *exc: object) -> None:
        if self._extra is not None:
            self._end_extra(perf_counter_ns())
        if _MARKS:
            _POP()
        self._regions.pop()

    def _end_extra(self, t1: int) -> None:
        label, t0 = self._extra  # type: ignore[misc]
        self._extra = None
        if t0:
            st = STATE
            sample = (self.path, st.step, st.tags, t0, t1)
            for timer in st.timers:
                timer.samples.append(sample)  # type: ignore[attr-defined]
        if label is not None:
            label.__exit__(None, None, None)  # type: ignore[attr-defined]


def _refuse(name: object) -> None:
    if not isinstance(name, str):
        raise TypeError(f"a region name is a string, got {name!r}")
    if not name:
        raise ValueError("a region name must not be empty")
    parts = ", ".join(repr(p) for p in name.split("/") if p)
    raise ValueError(
        f"region name {name!r} holds '/': a name is one path component (nest regions, or "
        f"region({parts}) for one region that many levels down)"
    )
