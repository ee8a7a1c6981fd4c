"""Objects handed to upstream in place of parts of the server it never builds here.

A ``Handed`` namespace (the model runner, its model config, a batch's speculative input) or an
instance of upstream's own class built without its constructor (``handed_instance``: the KV
pool) holds what the paths read; reading an attribute it lacks is tree drift, one line naming
upstream's reading line, not the cell's outcome.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from harness.upstream.loader import MissingAttribute, caller


def _missing(self: Any, name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise MissingAttribute(
        f"{caller()} reads {self._what}.{name}, which the harness's stand-in lacks"
    )


class Handed(SimpleNamespace):
    """What upstream is handed in place of a part of the server (the model runner, its model
    config, a batch's speculative input): reading an attribute it lacks is tree drift, one line
    naming upstream's reading line, not the cell's outcome."""

    def __init__(self, what: str, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._what = what

    __getattr__ = _missing


def handed_instance(cls: type, what: str, **attrs: Any) -> Any:
    """An instance of upstream's class `cls` built without its constructor, holding `attrs`:
    its methods run as upstream's, and reading an attribute it lacks is tree drift."""
    strict = type(cls.__name__, (cls,), {"__getattr__": _missing})
    obj = strict.__new__(strict)
    vars(obj).update(attrs, _what=what)
    return obj
