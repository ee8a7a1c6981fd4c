"""YAML 1.2's core schema for the scenarios, in place of PyYAML's YAML 1.1 readings.

PyYAML reads plain scalars by YAML 1.1: `010` is octal 8, `1:00` is 60 (base 60), `1_000` is
1000, `yes`/`on` are true. YAML 1.2 (its core schema, what editors and most other tools
read) makes `010` ten and the others text. A scenario means what it says only where both
agree, so a plain scalar that YAML 1.1 reads as a number other than YAML 1.2's reading is
refused (`Yaml11Number`, with its line); `yes`, `on` and dates are text, as in YAML 1.2, and a
key that expects true or false says so.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

NULL, BOOL = "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
INT, FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
YAML11_NUMBER = "tag:harness,2025:yaml11-number"  # read differently by YAML 1.1 and 1.2

# YAML 1.2.2, 10.3.2 (the core schema's tag resolution)
CORE = (  # (tag, pattern, the characters it may start with; "": the empty scalar)
    (NULL, r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    (BOOL, r"true|True|TRUE|false|False|FALSE", list("tTfF")),
    (INT, r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", list("-+0123456789")),
    (
        FLOAT,
        r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
        r"|[-+]?\.(inf|Inf|INF)|\.nan|\.NaN|\.NAN",
        list("-+.0123456789"),
    ),
)


class Core12Resolver(yaml.resolver.BaseResolver):
    """Plain scalars resolved by YAML 1.2's core schema; a YAML 1.1 number it reads
    otherwise is tagged YAML11_NUMBER (refused where it is constructed)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        tag = super().resolve(kind, value, implicit)
        if kind is yaml.ScalarNode and implicit[0] and _yaml11_reading(value) is not None:
            return YAML11_NUMBER
        return tag


Core12Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"]
)  # merge keys (`<<: *defaults`) are kept
for _tag, _pattern, _first in CORE:
    Core12Resolver.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), _first)

_YAML11 = yaml.resolver.Resolver()


def _yaml11_reading(value: str) -> int | float | None:
    """What YAML 1.1 reads `value` as, when it is a number YAML 1.2 reads otherwise."""
    old = _YAML11.resolve(yaml.ScalarNode, value, (True, False))
    if old not in (INT, FLOAT):
        return None
    node = yaml.ScalarNode(old, value)
    was = yaml.constructor.SafeConstructor().construct_object(node)
    now = core_number(value)
    same = now is not None and (was == now or (math.isnan(was) and math.isnan(now)))
    return None if same else was


def core_number(value: str) -> int | float | None:
    """A plain scalar's number by YAML 1.2's core schema (None: it is not one)."""
    for tag, pattern, _first in CORE[2:]:
        if re.fullmatch(pattern, value):
            return _construct_int(value) if tag == INT else _construct_float(value)
    return None


def _construct_int(text: str) -> int:
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text)


def _construct_float(text: str) -> float:
    lowered = text.lower()
    if lowered.endswith(".inf"):
        return -math.inf if lowered.startswith("-") else math.inf
    return math.nan if lowered == ".nan" else float(text)


class Yaml11Number(yaml.constructor.ConstructorError):
    """A plain scalar YAML 1.1 reads as a number and YAML 1.2 otherwise."""

    def __init__(self, value: str, was: int | float, mark: yaml.Mark):
        now = core_number(value)
        self.value = value
        self.readings = (
            f"YAML 1.1 reads it as {was!r}, YAML 1.2 as {'text' if now is None else now}"
        )
        super().__init__(problem=f"ambiguous number {value!r}", problem_mark=mark)


class Core12Constructor(yaml.constructor.SafeConstructor):
    """SafeConstructor with YAML 1.2's numbers, and a YAML 1.1 number refused."""

    def construct_core_int(self, node: yaml.ScalarNode) -> int:
        return _construct_int(self.construct_scalar(node))

    def construct_core_float(self, node: yaml.ScalarNode) -> float:
        return _construct_float(self.construct_scalar(node))

    def refuse_yaml11(self, node: yaml.ScalarNode) -> Any:
        value = self.construct_scalar(node)
        raise Yaml11Number(value, _yaml11_reading(value), node.start_mark)


Core12Constructor.add_constructor(INT, Core12Constructor.construct_core_int)
Core12Constructor.add_constructor(FLOAT, Core12Constructor.construct_core_float)
Core12Constructor.add_constructor(YAML11_NUMBER, Core12Constructor.refuse_yaml11)
