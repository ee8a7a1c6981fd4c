"""Every program: its modules import torch, so they are imported (and register) when the
programs are first asked for, not with the package."""

from __future__ import annotations

from harness.programs import engine, hf, layers, training, vision  # noqa: F401  (they register)
from harness.programs.registry import PROGRAMS, Program


def programs() -> dict[str, Program]:
    return PROGRAMS


def program_names() -> list[str]:
    return list(PROGRAMS)
