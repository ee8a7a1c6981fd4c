"""Cells of a scenario and the worlds that run them.

A cell is one (variant, mirror, batch size) of a scenario; what a cell means is up to the
scenario's world (`Scenario.world`): the serving world sweeps backend variants and mirror
settings, the sync-cost experiment (harness.synccost) names its cases in `variant`. Worlds
register how they enumerate cells and build a world for one.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import os
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from harness.results.tables import NO_TAG
from harness.scenario import Scenario


@dataclass(frozen=True)
class Cell:
    variant: str
    mirror: str
    batch_size: int

    def label(self) -> str:
        return f"{self.variant}/mirror={self.mirror}/bs={self.batch_size}"


class World(Protocol):
    """What the runner needs of a world."""

    findings: list[Any]

    def warmup_and_capture(self) -> None: ...
    def step(self) -> Any: ...


WorldBuilder = Callable[[Scenario, Cell, torch.device], World]


@dataclass(frozen=True)
class Problem:
    """Why a cell cannot run: the scenario keys at fault and what is wrong with them."""

    keys: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class Footprint:
    """Memory a cell's world holds at least, and the keys that size it."""

    host_bytes: int
    device_bytes: int  # on the emulated device, host memory too
    keys: tuple[str, ...]


@dataclass(frozen=True)
class WorldKind:
    """How a scenario's cells are enumerated, how one cell becomes a world, and what the
    runner checks before any pass: rules across keys a cell's world cannot run with, and the
    memory it needs (harness.runner.preflight)."""

    cells: Callable[[Scenario], list[Cell]]
    build: WorldBuilder
    check: Callable[[Scenario, Cell], Problem | None] = lambda sc, cell: None
    footprint: Callable[[Scenario, Cell], Footprint | None] = lambda sc, cell: None


WORLDS: dict[str, WorldKind] = {}
# modules that register a world when imported (the serving world registers below)
WORLD_MODULES = ("harness.synccost.world",)


def register_world(name: str, kind: WorldKind) -> None:
    if name in WORLDS:
        raise RuntimeError(f"world {name!r} registered twice")
    WORLDS[name] = kind


def world_kind(sc: Scenario) -> WorldKind:
    for module in WORLD_MODULES:
        importlib.import_module(module)
    return WORLDS[sc.world]


def cells(sc: Scenario) -> list[Cell]:
    """The scenario's cells, in the order its world enumerates them."""
    return world_kind(sc).cells(sc)


def build_scenario_world(sc: Scenario, cell: Cell, device: torch.device) -> World:
    """The world of the scenario's kind for one cell."""
    return world_kind(sc).build(sc, cell, device)


def serving_cells(sc: Scenario) -> list[Cell]:
    """Every combination, in a stable order (variant-major so a variant's rows sit together)."""
    return [Cell(v, m, b) for v, m, b in itertools.product(sc.variants, sc.mirror, sc.batch_sizes)]


def world_config_kwargs(sc: Scenario, cell: Cell) -> dict[str, Any]:
    """Scenario + cell -> WorldConfig fields."""
    kw: dict[str, Any] = {
        "model": sc.model,
        "variant": cell.variant,
        "serving_mode": sc.serving_mode,
        "mirror": cell.mirror,
        "batch_size": cell.batch_size,
        "context_len": sc.context_len,
        "seed": sc.seed,
        "prefill_every": sc.prefill_every,
        "cuda_graph": sc.cuda_graph,
        "cuda_graph_max_bs": sc.cuda_graph_max_bs,
        "prep_in_graph": sc.prep_in_graph,
        "speculative": sc.spec is not None,
        "forward_us": sc.forward_us,
        "kernels": sc.kernels,
    }
    if sc.spec is not None:
        kw.update(
            spec_steps=sc.spec.steps,
            spec_topk=sc.spec.topk,
            draft_tokens=sc.spec.draft_tokens,
            accept_mean=sc.spec.accept_mean,
        )
    return kw


def build_serving_world(sc: Scenario, cell: Cell, device: torch.device) -> World:
    """The real world from harness.serving (imported late: the scenario layer must not need it)."""
    from harness.serving import WorldConfig, build_world

    kw = world_config_kwargs(sc, cell)
    known = {f.name for f in dataclasses.fields(WorldConfig)}
    missing = sorted(set(kw) - known)
    if missing:  # a scenario key the world cannot honour must not be dropped silently
        raise TypeError(f"WorldConfig has no field(s) {missing}")
    return build_world(WorldConfig(**kw), device)


def check_serving_cell(sc: Scenario, cell: Cell) -> Problem | None:
    """A request must fit in the context: the scheduler's rule, before any world is built."""
    from harness.serving import WorldConfig
    from harness.serving.scheduler import min_context_len

    wc = WorldConfig(**world_config_kwargs(sc, cell))
    need = min_context_len(wc.prompt_len, wc.spec)
    if sc.context_len < need:
        return Problem(
            ("context_len",),
            f"{sc.context_len} is too small: arriving prompts of up to {wc.prompt_len[1]} "
            f"tokens and a step's writes need at least {need}",
        )
    return None


def serving_footprint(sc: Scenario, cell: Cell) -> Footprint:
    """The request pool (the bulk of a serving world): at least one row per request."""
    from harness.batch.pool import PoolConfig

    pool = PoolConfig(max_reqs=cell.batch_size, context_len=sc.context_len)
    return Footprint(pool.host_bytes, pool.device_bytes, ("batch_sizes", "context_len"))


register_world(
    "serving",
    WorldKind(serving_cells, build_serving_world, check_serving_cell, serving_footprint),
)


def step_path(paths: Iterable[str]) -> str:
    """The path of a whole step from the paths its forward passes ran on: "eager" when any
    pass ran eagerly, else "graph" ("none" without a forward pass). Rows outside a forward
    pass (scheduler regions, the step itself) that carry no path tag take this one."""
    seen = set(paths)
    if "eager" in seen:
        return "eager"
    return "graph" if "graph" in seen else "none"


def tag_value(tags: tuple[tuple[str, str], ...], key: str) -> str:
    """The value of one tag of a region entry or sample (NO_TAG when absent)."""
    for k, v in tags:
        if k == key:
            return v
    return NO_TAG


# ---------------------------------------------------------------------------------------------
# where a failure was raised

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_SKIP = (_TORCH_DIR, os.path.join("harness", "sync") + os.sep, "contextlib.py")


def failure_site(exc: BaseException) -> tuple[str, str]:
    """(file:line, function) of the innermost frame outside torch and the ledger machinery."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if not any(s in fr.filename for s in _SKIP):
            return f"{_short(fr.filename)}:{fr.lineno}", fr.name
    if frames:
        return f"{_short(frames[-1].filename)}:{frames[-1].lineno}", frames[-1].name
    return "", ""


def failure_info(exc: BaseException) -> tuple[str, str, str, str]:
    """(exception type, first line of its message, file:line, function) for outcomes.csv."""
    location, function = failure_site(exc)
    text = str(exc)
    message = text.splitlines()[0][:300] if text else ""
    return type(exc).__name__, message, location, function


def _short(filename: str) -> str:
    cwd = os.getcwd() + os.sep
    return filename[len(cwd) :] if filename.startswith(cwd) else filename


def effective_mirror(world: Any) -> str | None:
    """'present' / 'absent': whether the world's decode batches carry the host mirror."""
    return getattr(world, "decode_mirror", None)


def finding_row_parts(f: Any) -> tuple[Any, str, str, str, str]:
    """(step, forward_mode, path, kind, detail) of a world finding; its other fields are
    folded into detail as key=value."""
    if dataclasses.is_dataclass(f):
        d = dataclasses.asdict(f)
    elif isinstance(f, dict):
        d = dict(f)
    else:
        d = {"detail": str(f)}
    step = d.pop("step", None)
    forward_mode = str(d.pop("forward_mode", "") or "")
    path = str(d.pop("path", "") or "")
    kind = str(d.pop("kind", "finding"))
    detail = d.pop("detail", None)
    rest = "; ".join(f"{k}={v}" for k, v in d.items())
    text = "; ".join(str(p) for p in (detail, rest) if p not in (None, ""))
    return step, forward_mode, path, kind, text
