"""Cells (variant × mirror × batch size) and how one becomes a serving world."""

from __future__ import annotations

import dataclasses
import itertools
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from harness.scenario import Scenario


@dataclass(frozen=True)
class Cell:
    variant: str
    mirror: str
    batch_size: int

    def label(self) -> str:
        return f"{self.variant}/mirror={self.mirror}/bs={self.batch_size}"


def cells(sc: Scenario) -> list[Cell]:
    """Every combination, in a stable order (variant-major so a variant's rows sit together)."""
    return [Cell(v, m, b) for v, m, b in itertools.product(sc.variants, sc.mirror, sc.batch_sizes)]


class World(Protocol):
    """What the runner needs of harness.serving's world."""

    findings: list[Any]

    def warmup_and_capture(self) -> None: ...
    def step(self) -> Any: ...


WorldBuilder = Callable[[Scenario, Cell, torch.device], World]


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
