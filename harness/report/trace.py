"""A Chrome / Perfetto trace (JSON) of a run's measured steps, for ui.perfetto.dev.

- one process per cell (scenario · case · variant · mirror · batch size · rank), steps laid
  end to end, or where the run's world places them on a time axis its cells share
  (`ReportPart.step_starts`: a DP-attention cell's ranks, aligned at the exchange);
- host track: each time-pass region exit as a slice (nesting from the region paths), the whole
  iteration as the outermost slice; device track: the iteration's device time (CUDA events);
- each count-pass sync as an instant event on the host track, inside its region, carrying
  kind, op, location, function, bytes and the stack.

The two passes never share a run (instruments distort time), so sync instants are placed by
(cell, step, forward mode, region), not by time: the k-th sync of a region in a step goes
into that region's slices of the same step, spread evenly. Region start times come from the
latency column `start_us` when the runner writes it; otherwise they are laid out from exit
order and durations (children back to back inside their parent, slack spread in the gaps) and
the trace says so in its metadata. Runs without a time pass get unit-length slices.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd

from harness.report import tables
from harness.report.figures import report_parts
from harness.results.load import CELL_KEYS, RunData, rows_of
from harness.results.vocabulary import known_vocabulary

HOST_TID, DEVICE_TID = 1, 2
STEP_GAP_US = 5.0  # white space between steps so step boundaries are visible when zoomed
UNIT_US = 10.0  # slice length when the run has no time pass


@dataclass
class _Node:
    region: str
    mode: str
    path: str
    dur_us: float
    start_us: float | None = None  # from the runner, when it writes start_us
    children: list[_Node] = field(default_factory=list)


def _forest(rows: list[dict]) -> list[_Node]:
    """Rebuild region nesting from exit order: a region's children exited just before it."""
    done: list[_Node] = []
    for r in rows:
        node = _Node(
            r["region"], r["forward_mode"], r["path"], float(r["value_us"]), r.get("start_us")
        )
        prefix = node.region + "/"
        k = len(done)
        while k > 0 and done[k - 1].region.startswith(prefix):
            k -= 1
        node.children, done[k:] = done[k:], []
        node.dur_us = max(node.dur_us, sum(c.dur_us for c in node.children))
        done.append(node)
    return done


def _place(
    nodes: list[_Node],
    t0: float,
    span: float,
    out: list[tuple[_Node, float]],
    step_start: float | None = None,
) -> None:
    """Give every node a start time inside [t0, t0 + span]; exact when start_us (µs after the
    start of the step, at any depth) is known."""
    origin = t0 if step_start is None else step_start
    slack = max(span - sum(n.dur_us for n in nodes), 0.0) / (len(nodes) + 1)
    t = t0 + slack
    for n in nodes:
        start = origin + n.start_us if n.start_us == n.start_us and n.start_us is not None else t
        out.append((n, start))
        _place(n.children, start, n.dur_us, out, origin)
        t = start + n.dur_us + slack


def _cell_name(cell: tuple, multi_rank: bool) -> str:
    s, case, v, m, b, rank, arm = cell
    parts = [s, case, v, m and f"mirror={m}", b and f"bs {int(b)}", arm and f"arm {arm}"]
    parts.append(f"rank {rank}" if multi_rank or str(rank) not in ("", "0") else "")
    return " · ".join(str(p) for p in parts if p)


def _step_starts(run: RunData) -> dict[tuple, float]:
    """Where each (*cell, step) starts on a time axis its world's cells share (empty: none)."""
    out: dict[tuple, float] = {}
    for world, part in report_parts(run).items():
        if part.step_starts is not None:
            out.update(part.step_starts(rows_of(run, world)))
    return out


def _step_rows(run: RunData) -> tuple[dict, dict, bool]:
    """Per (cell, step): region exits in order, and the iteration's metrics (µs)."""
    lat = run.latency
    # the first process's steps (with --repeats N, each process ran the same steps)
    lat = lat[~lat["path"].isin(tables.UNMEASURED_TIME) & (lat["step"] >= 0)]
    lat = lat[lat["process"] == lat["process"].min()] if len(lat) else lat
    if "start_us" not in lat:
        lat = lat.assign(start_us=float("nan"))
    host = lat[(lat["metric"] == "host") & (lat["region"] != tables.STEP_REGION)]
    regions: dict[tuple, list[dict]] = defaultdict(list)
    for r in host.to_dict("records"):
        regions[(*(r[k] for k in CELL_KEYS), int(r["step"]))].append(r)
    it = lat[lat["region"] == tables.STEP_REGION]
    iteration: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in it.to_dict("records"):
        iteration[(*(r[k] for k in CELL_KEYS), int(r["step"]))][r["metric"]] = r["value_us"]
    exact = bool(lat["start_us"].notna().any())
    return regions, iteration, exact


def _count_only_rows(run: RunData) -> dict[tuple, list[dict]]:
    """Without a time pass: each region a step entered (counts.csv), UNIT_US long, nested."""
    m = tables.measured(run.counts)
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in m.to_dict("records"):
        out[(*(r[k] for k in CELL_KEYS), int(r["step"]))].append({**r, "value_us": UNIT_US})
    for key, rows in out.items():  # deepest first approximates exit order (children first)
        out[key] = sorted(rows, key=lambda r: -r["region"].count("/"))
    return out


def build_trace(run: RunData, max_steps: int | None = None) -> dict:
    """The trace as a dict (json.dump it). max_steps: first N measured steps of each cell."""
    regions, iteration, exact = _step_rows(run)
    timed = bool(regions)
    if not timed:
        regions = _count_only_rows(run)
    syncs = tables.measured(run.syncs, run.counts)
    by_step: dict[tuple, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for s in syncs.to_dict("records"):
        step_key = (*(s[k] for k in CELL_KEYS), int(s["step"]))
        by_step[step_key][(s["forward_mode"], s["region"])].append(s)
    order = {v: i for i, v in enumerate(known_vocabulary().variants)}
    n = len(CELL_KEYS)
    # rank after the scenario and case: a DP cell's ranks are neighbours
    cells = sorted(
        {k[:n] for k in regions}, key=lambda c: (c[0], c[1], c[5], order.get(c[2], 99), *c)
    )
    starts = _step_starts(run)
    multi_rank = len({c[5] for c in cells}) > 1
    trace = _Trace(stacks=run.stacks)
    for pid, cell in enumerate(cells, start=1):
        trace.name_process(pid, _cell_name(cell, multi_rank))
        trace.name_thread(pid, HOST_TID, "host (time pass; syncs from count pass)")
        if any(k[:n] == cell and "device" in m for k, m in iteration.items()):
            trace.name_thread(pid, DEVICE_TID, "device (CUDA events; start approximate)")
        t = 0.0
        for step in sorted(k[n] for k in regions if k[:n] == cell)[:max_steps]:
            key = (*cell, step)
            t0 = starts.get(key, t)
            t = trace.add_step(pid, step, t0, regions[key], iteration.get(key, {}), by_step[key])
    layout = (
        "exact (start_us)" if exact else "from exit order and durations (start times approximate)"
    )
    other = {
        "run": str(run.path),
        "device": run.device,
        "region_layout": layout if timed else "no time pass: unit-length slices",
        "step_layout": "as the run's world places them, on a time axis its cells share"
        if starts
        else "steps of each process end to end",
        "syncs_placed": trace.syncs_placed,
        "syncs_in_run": len(syncs),
        "note": "syncs come from the count pass and are placed inside their region, not timed",
        **{k: run.meta.get(k) for k in ("command", "git_commit", "gpu_name", "start_time")},
    }
    return {"traceEvents": trace.events, "displayTimeUnit": "ms", "otherData": other}


@dataclass
class _Trace:
    stacks: dict
    events: list[dict] = field(default_factory=list)
    syncs_placed: int = 0

    def name_process(self, pid: int, name: str) -> None:
        self.events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
        self.events.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
        )

    def name_thread(self, pid: int, tid: int, name: str) -> None:
        self.events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
        )

    def add_step(
        self, pid: int, step: int, t: float, rows: list[dict], metrics: dict, syncs: dict
    ) -> float:
        """One measured step from time t: iteration, regions, device time, syncs. Returns the
        time the next step starts."""
        forest = _forest(rows)
        span = max(metrics.get("host", 0.0), sum(n.dur_us for n in forest))
        args = {"step": step, **{f"{m}_us": round(v, 3) for m, v in metrics.items()}}
        self.events.append(_slice(f"iteration {step}", "iteration", pid, HOST_TID, t, span, args))
        if "device" in metrics:
            dev = _slice(f"device {step}", "device", pid, DEVICE_TID, t, metrics["device"], {})
            self.events.append(dev)
        placed: list[tuple[_Node, float]] = []
        _place(forest, t, span, placed)
        instances: dict[tuple, list[tuple[_Node, float]]] = defaultdict(list)
        for node, start in placed:
            args = {"step": step, "forward_mode": node.mode, "path": node.path}
            self.events.append(
                _slice(node.region, "region", pid, HOST_TID, start, node.dur_us, args)
            )
            instances[(node.mode, node.region)].append((node, start))
        whole = [(_Node(tables.STEP_REGION, "", "", span), t)]
        for (mode, region), group in syncs.items():
            where = instances.get((mode, region)) or _enclosing(instances, region) or whole
            self.syncs_placed += _instants(self.events, group, where, pid, self.stacks)
        return t + max(span, metrics.get("e2e", 0.0)) + STEP_GAP_US


def _enclosing(instances: dict, region: str) -> list:
    """Slices of the deepest timed region enclosing `region` (a sync whose own region the
    time pass did not see in that step, e.g. a failed or differently-pathed pass)."""
    best: list = []
    depth = -1
    for (_mode, r), where in instances.items():
        if region.startswith(r + "/") and r.count("/") > depth:
            best, depth = where, r.count("/")
    return best


def _slice(name: str, cat: str, pid: int, tid: int, ts: float, dur: float, args: dict) -> dict:
    # Round both ends (ns resolution), then take the difference: rounding is monotonic, so a
    # child that ends inside its parent still does after rounding (Perfetto drops overlaps).
    start, end = round(ts, 3), round(ts + max(dur, 0.001), 3)
    return {
        "ph": "X",
        "name": name,
        "cat": cat,
        "pid": pid,
        "tid": tid,
        "ts": start,
        "dur": round(end - start, 3),
        "args": args,
    }


def _instants(events: list, syncs: list[dict], where: list, pid: int, stacks: dict) -> int:
    """Spread a region's syncs of one step evenly over that region's slices in the step."""
    if not syncs or not where:
        return 0
    buckets: list[list[dict]] = [[] for _ in where]
    for i, s in enumerate(syncs):  # keep event order: earlier syncs in earlier slices
        buckets[i * len(where) // len(syncs)].append(s)
    for (node, start), group in zip(where, buckets):
        for k, s in enumerate(group):
            nbytes = s.get("nbytes")
            events.append(
                {
                    "ph": "i",
                    "s": "t",
                    "name": f"sync {s['kind']} {s['op']}",
                    "cat": f"sync,{s['kind']}",
                    "pid": pid,
                    "tid": HOST_TID,
                    "ts": round(start + node.dur_us * (k + 1) / (len(group) + 1), 3),
                    "args": {
                        "kind": s["kind"],
                        "op": s["op"],
                        "location": s["location"],
                        "function": s["function"],
                        "region": s["region"],
                        "nbytes": None if pd.isna(nbytes) else int(nbytes),
                        "stack": stacks.get(str(s["stack_id"]), []),
                    },
                }
            )
    return len(syncs)
