"""The real programs' scenario section, `programs`: which programs are the cells."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scenario.validate import rule

SECTION = "programs"


def program_names() -> list[str]:
    """The registered programs (their modules import torch: asked for when a value is checked
    or defaulted)."""
    from harness.programs.catalogue import program_names as registered

    return registered()


@dataclass
class ProgramsConfig:
    """Each program is a cell; a step of it is one call of its step (harness.programs)."""

    names: list[str] = field(
        default_factory=program_names,
        metadata=rule(
            "programs to run (a sweep; default: every one)",
            choices_fn=program_names,
            nonempty=True,
        ),
    )
