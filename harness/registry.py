"""The world registry: a world is a plugin.

A world (the serving world, the sync-cost experiment, DP attention, the real programs, ...) is
one package, ``harness/<name>/``, whose module ``plugin.py`` registers one `WorldPlugin`: a
part for each layer it plugs into. Each layer defines its own part — the scenario's
(`harness.scenario.schema.ScenarioPart`: its sections), the runner's
(`harness.runner.cells.RunnerPart`: its cells and builder), the results'
(`harness.results.vocabulary.ResultsPart`: its summary and vocabulary) and the report's
(`harness.report.figures.ReportPart`: its figures) — and looks the worlds up here; none of
those layers imports a world. The plugins are found by that convention the first time a world
is asked for (as the command line finds `harness.commands`), so adding a world is adding its
package.

Finding the worlds imports every plugin, and the report runs where torch is not installed: a
plugin module and its package's ``__init__`` import nothing heavy (torch, matplotlib) at
import time; what needs them is imported where it is called.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
PACKAGE = Path(__file__).resolve().parent
PLUGIN_MODULE = "plugin"


@dataclass(frozen=True)
class WorldPlugin:
    name: str
    parts: tuple[object, ...]  # at most one part of each layer

    def part(self, cls: type[T]) -> T | None:
        """This world's part of the layer whose part class is `cls` (None: it has none)."""
        return next((p for p in self.parts if isinstance(p, cls)), None)


_WORLDS: dict[str, WorldPlugin] = {}
_FOUND = False


def register_world(plugin: WorldPlugin) -> WorldPlugin:
    if plugin.name in _WORLDS:
        raise RuntimeError(f"world {plugin.name!r} registered twice")
    kinds = [type(p) for p in plugin.parts]
    if len(set(kinds)) != len(kinds):
        raise RuntimeError(f"world {plugin.name!r} has two parts of one layer")
    _WORLDS[plugin.name] = plugin
    return plugin


def worlds() -> dict[str, WorldPlugin]:
    """Every world, by name, in the order their plugins registered."""
    global _FOUND
    if not _FOUND:
        for path in sorted(PACKAGE.glob(f"*/{PLUGIN_MODULE}.py")):
            importlib.import_module(f"{__package__}.{path.parent.name}.{PLUGIN_MODULE}")
        _FOUND = True
    return _WORLDS


def world(name: str) -> WorldPlugin:
    """The world called `name` (KeyError naming the known ones)."""
    found = worlds()
    if name not in found:
        raise KeyError(f"no world {name!r}; known: {', '.join(found)}")
    return found[name]


def parts(cls: type[T]) -> dict[str, T]:
    """Every world's part of one layer, by world name (worlds without one left out)."""
    out = {}
    for name, plugin in worlds().items():
        part = plugin.part(cls)
        if part is not None:
            out[name] = part
    return out
