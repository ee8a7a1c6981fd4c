"""The code states of sglang's DeepSeek-V4 backend that the harness models: the one list of
variants, free of torch and of the backend.

Each variant names the upstream commit it models; one is the reference every other is measured
against. The backend implements a policy for each (`@policy` in harness.backend.variants), the
fidelity table describes each one's upstream lines, and the scenarios, the summaries, the report
and the gate read the names, their order and the reference from here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str
    commit: str  # the upstream sglang commit it models
    what: str
    reference: bool = False


# name -> variant, in the order tables, figures and colours show them
VARIANTS: dict[str, Variant] = {}


def declare(name: str, commit: str, what: str, *, reference: bool = False) -> Variant:
    """Add a variant (at the end of the reading order)."""
    if name in VARIANTS:
        raise ValueError(f"variant {name!r} declared twice")
    if reference and any(v.reference for v in VARIANTS.values()):
        raise ValueError(f"variant {name!r}: {reference_variant()!r} is the reference already")
    VARIANTS[name] = Variant(name, commit, what, reference)
    return VARIANTS[name]


def forget(name: str) -> None:
    """Remove a declared variant (a test that declares one more gives it back)."""
    del VARIANTS[name]


declare("before", "a36c8731", "parent of PR #30695: the mirror is required", reference=True)
declare("after", "504570f4", "PR #30695: an absent mirror is tolerated by reading the device")
declare("dropped", "a9cf5e68", "PR #30365: the mirror is really dropped, device-only paths")


def variant_names() -> list[str]:
    return list(VARIANTS)


def reference_variant() -> str:
    return next(v.name for v in VARIANTS.values() if v.reference)
