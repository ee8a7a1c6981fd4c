"""What the sync ledger and its peers cost on the host, per metadata-sized step.

Configurations run interleaved round by round (drift in clocks and caches hits all alike), each
timed per step with perf_counter_ns; every sample is kept. The step is sync-free and shaped like
the backend's metadata paths (gathers, clamps, masks, copies; three regions). On a GPU it runs on
CUDA tensors; elsewhere on plain CPU tensors, which shows the host side of regions and ledgers.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from syncledger import SyncLedger, cupti, max_syncs, region

Mark = Callable[[str], contextlib.AbstractContextManager[object]]
Step = Callable[[Mark], None]
Row = dict[str, object]
WARMUP = 10


@dataclass(frozen=True)
class Target:
    """A ratio to the interleaved plain step (or, for `region_enter_exit`, ns) not to exceed."""

    config: str
    limit: float
    unit: str  # "x" or "ns"


TARGETS = (
    Target("ledger_across_steps", 1.05, "x"),
    Target("max_syncs_per_step", 1.08, "x"),
    Target("region_enter_exit", 1000.0, "ns"),
)


def metadata_step(
    dev: torch.device,
    bs: int = 64,
    ctx: int = 4096,
    place: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> Step:
    """A sync-free step shaped like the metadata paths: gathers, clamps, masks, copies. Its
    tensors are made on the host and moved to `dev` (or handed to `place`)."""
    put = place or (lambda t: t.to(dev))
    g = torch.Generator().manual_seed(0)
    seq_lens = put(torch.randint(1, ctx, (bs,), generator=g, dtype=torch.int32))
    req_to_token = put(torch.arange(bs * ctx, dtype=torch.int32).view(bs, ctx))
    pool_idx = put(torch.randperm(bs, generator=g))
    out_loc = put(torch.randint(0, bs * ctx, (bs,), generator=g))
    full_to_swa = put(torch.arange(bs * ctx, dtype=torch.int64).remainder(bs * 128))
    dst = put(torch.zeros(bs, dtype=torch.int32))
    cols = put(torch.arange(128))

    def step(mark: Mark) -> None:
        with mark("step"):
            with mark("out_graph"):  # one mark per region, as the backend makes them
                lens = seq_lens.clamp(min=1)
                dst.copy_(lens)
                pos = lens - 1
                loc = out_loc % (bs * ctx)
            with mark("in_graph"):
                pages = req_to_token[pool_idx][:, ::256] // 256
                win = pos.unsqueeze(1) - cols.unsqueeze(0)
                valid = win >= 0
                slots = req_to_token[pool_idx].gather(1, win.clamp(min=0))
                swa = torch.where(valid, full_to_swa[slots.long()], -1).to(torch.int32)
                swa_len = lens.clamp(max=128)
                for r in (4, 128):
                    raw = lens // r
                    clamp1 = raw.clamp(min=1)
                    c_loc = torch.where(lens % r == 0, loc // r, 0)
                    del raw, clamp1, c_loc
                topk = torch.minimum(lens // 4, torch.full_like(lens, 512))
                sched = torch.cumsum(topk, 0)
                swa_out = full_to_swa[loc]
                del pages, swa, swa_len, sched, swa_out

    return step


def _no_mark(name: str) -> contextlib.AbstractContextManager[object]:
    return contextlib.nullcontext()


_none = contextlib.nullcontext


def _drain(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def time_steps(
    step: Step,
    mark: Mark,
    dev: torch.device,
    n: int,
    per_step: Callable[[], contextlib.AbstractContextManager[object]],
) -> list[int]:
    """Host ns of each of `n` steps, after WARMUP untimed ones (the device drained around)."""
    for _ in range(WARMUP):
        with per_step():
            step(mark)
    _drain(dev)
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        with per_step():
            step(mark)
        out.append(time.perf_counter_ns() - t0)
    _drain(dev)
    return out


@contextlib.contextmanager
def _sync_debug_warn() -> Iterator[None]:
    saved, mode = warnings.showwarning, torch.cuda.get_sync_debug_mode()
    warnings.showwarning = lambda *a, **k: None
    torch.cuda.set_sync_debug_mode("warn")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(mode)
        warnings.showwarning = saved


@dataclass(frozen=True)
class _Config:
    name: str
    around_round: Callable[[], contextlib.AbstractContextManager[object]]
    around_step: Callable[[], contextlib.AbstractContextManager[object]]
    mark: Mark


def _host_configs(dev: torch.device) -> list[_Config]:
    """The ledger and its peers, before any profiler ran (CUPTI, once attached by a profiler,
    slows every later launch)."""
    none = _none
    configs = [
        _Config("plain", none, none, _no_mark),
        _Config("regions", none, none, region),
        _Config("ledger_across_steps", SyncLedger, none, region),
        _Config("max_syncs_per_step", none, lambda: max_syncs(0), region),
    ]
    if dev.type == "cuda":
        configs.append(_Config("sync_debug_warn", _sync_debug_warn, none, _no_mark))
        # the same ledger with the CUPTI detector left out: CUPTI's own share of the cost
        configs.append(_Config("ledger_without_cupti", _ledger_without_cupti, none, region))
    return configs


@contextlib.contextmanager
def _ledger_without_cupti() -> Iterator[None]:
    with cupti.paused(), SyncLedger():
        yield


def _profiler_configs(post_ns: list[int]) -> list[_Config]:
    return [
        _Config("plain_after_profiler", _none, _none, _no_mark),
        _Config("profiler_loop", lambda: _profiling(post_ns), _none, region),
    ]


STEP_CONFIGS = (
    "plain",
    "regions",
    "ledger_across_steps",
    "max_syncs_per_step",
    "sync_debug_warn",
    "ledger_without_cupti",
    "plain_after_profiler",
    "profiler_loop",
)


@contextlib.contextmanager
def _profiling(post_ns: list[int]) -> Iterator[None]:
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        yield
    t0 = time.perf_counter_ns()
    prof.key_averages()
    post_ns.append(time.perf_counter_ns() - t0)


def sample_rows(config: str, samples: list[int]) -> list[Row]:
    """One row per sample, in ns."""
    return [
        {"config": config, "sample": i, "value": v, "unit": "ns"} for i, v in enumerate(samples)
    ]


def _interleaved(configs: list[_Config], dev: torch.device, steps: int, rounds: int) -> list[Row]:
    step = metadata_step(dev)
    samples: dict[str, list[int]] = {c.name: [] for c in configs}
    per_round = max(1, steps // rounds)
    for r in range(rounds):
        for c in configs[r % len(configs) :] + configs[: r % len(configs)]:
            with c.around_round():
                samples[c.name] += time_steps(step, c.mark, dev, per_round, c.around_step)
    return [row for name, values in samples.items() for row in sample_rows(name, values)]


def step_overhead(dev: torch.device, steps: int, rounds: int = 6) -> list[Row]:
    """Per-step host ns of the ledger's configurations and its peers, interleaved round by round.
    Run it before any profiler in the process; the targets are ratios to its `plain`."""
    return _interleaved(_host_configs(dev), dev, steps, rounds)


def profiler_overhead(steps: int, rounds: int = 6) -> list[Row]:
    """The PyTorch profiler in the loop (and its post-processing per step) on CUDA, interleaved
    with the plain step as it runs once a profiler has attached CUPTI."""
    post_ns: list[int] = []
    rows = _interleaved(_profiler_configs(post_ns), torch.device("cuda"), steps, rounds)
    per_profile = max(1, steps // rounds) + WARMUP
    return rows + sample_rows("profiler_postprocess_per_step", [v // per_profile for v in post_ns])


def _loop_ns(body: Callable[[], contextlib.AbstractContextManager[object]], n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with body():
            pass
    return time.perf_counter_ns() - t0


def enter_exit_costs(n: int = 100_000, reps: int = 5) -> list[Row]:
    """Host ns of one enter+exit, minus the bare loop: `region()` with no ledger open, and a
    ledger opened and closed (with no ops inside)."""
    rows: list[Row] = []
    for name, body in (
        ("region_enter_exit", lambda: region("r")),
        ("ledger_open_close", SyncLedger),
    ):
        for i in range(reps):
            bare = _loop_ns(contextlib.nullcontext, n)
            value = max(0, (_loop_ns(body, n) - bare) // n)
            rows.append({"config": name, "sample": i, "value": value, "unit": "ns"})
    return rows


def median(rows: list[Row], config: str) -> float | None:
    values = [float(r["value"]) for r in rows if r["config"] == config]  # type: ignore[arg-type]
    return statistics.median(values) if values else None


def target_verdicts(rows: list[Row]) -> list[tuple[Target, float | None, bool]]:
    """Each target with the measured value (ratio to the plain step, or ns) and whether it is
    met."""
    base = median(rows, "plain")
    out = []
    for t in TARGETS:
        value = median(rows, t.config)
        if t.unit == "x" and value is not None:
            value = value / base if base else None
        out.append((t, value, value is not None and value <= t.limit))
    return out
