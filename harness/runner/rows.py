"""What the passes record of a cell besides its samples: the path of a step, a tag's value,
where a failure was raised, the world's effective mirror, its findings as rows."""

from __future__ import annotations

import dataclasses
import os
import traceback
from collections.abc import Iterable
from typing import Any

from harness.results.tables import NO_TAG
from syncledger.events import is_machinery


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


def failure_site(exc: BaseException) -> tuple[str, str]:
    """(file:line, function) of the innermost frame outside torch and the ledger machinery."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if not is_machinery(fr.filename):
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
