"""The results' part of a world: its summary, and how it names its cells for readers.

A world registers a `ResultsPart` (harness.registry): the sections of the terminal summary
of its runs (`harness.results.summary.format_summary` prints them), and its `Vocabulary`:
the variants and mirror settings it sweeps, in the order tables and figures show them, and the
reference variant every other is compared with. Nothing here knows a world's names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness import registry

if TYPE_CHECKING:
    from harness.results.load import RunData


@dataclass(frozen=True)
class Vocabulary:
    variants: tuple[str, ...] = ()
    mirrors: tuple[str, ...] = ()  # the first is the setting that needs no label
    reference: str | None = None


@dataclass(frozen=True)
class ResultsPart:
    summary: Callable[[RunData], list[str]]  # the summary's lines, section by section
    # read when asked, not at registration: a world's registries (its variants) may grow
    vocabulary_of: Callable[[], Vocabulary] = Vocabulary

    @property
    def vocabulary(self) -> Vocabulary:
        return self.vocabulary_of()


def results_part(world: str) -> ResultsPart:
    part = registry.world(world).part(ResultsPart)
    if part is None:
        raise RuntimeError(f"world {world!r} registers no results part")
    return part


def known_vocabulary() -> Vocabulary:
    """Every world's variants and mirror settings, in registration order (a reader of several
    runs of different worlds shows them together)."""
    variants: dict[str, None] = {}
    mirrors: dict[str, None] = {}
    for part in registry.parts(ResultsPart).values():
        variants.update(dict.fromkeys(part.vocabulary.variants))
        mirrors.update(dict.fromkeys(part.vocabulary.mirrors))
    return Vocabulary(tuple(variants), tuple(mirrors))
