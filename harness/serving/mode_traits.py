"""The serving modes and what a scenario may ask of each: the one list of them, free of torch
(a scenario is validated without importing the serving stack). Each is implemented once in
harness.serving.modes, which refuses a mode that is not declared here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModeTraits:
    name: str
    # True/False: always/never speculative; None: as configured (the direct mode)
    spec: bool | None = False
    # the mirror settings this mode accepts ("auto" = what upstream's serving code does)
    mirror_settings: tuple[str, ...] = ("auto",)
    # batches come from the serving stack (scheduler, ForwardBatch.init_new, the speculative
    # worker), not built by hand as the direct mode does
    serving_stack: bool = True
    # the scheduler loop: True, the overlap scheduler (a step processes the previous step's
    # results); False, the normal loop (its own); None, no scheduler (no results processed)
    overlap: bool | None = True


MODES: dict[str, ModeTraits] = {
    t.name: t
    for t in (
        ModeTraits("nonspec"),
        ModeTraits("eagle", spec=True, overlap=False),
        ModeTraits("specv2", spec=True, mirror_settings=("auto", "present", "absent")),
        ModeTraits(
            "direct",
            spec=None,
            mirror_settings=("present", "absent"),
            serving_stack=False,
            overlap=None,
        ),
    )
}


def mode_names() -> list[str]:
    return list(MODES)


def traits_of(name: str) -> ModeTraits:
    """ValueError naming the known modes for an unknown one."""
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown serving mode {name!r}; known: {sorted(MODES)}") from None
