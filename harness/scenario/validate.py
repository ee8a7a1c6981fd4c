"""The generic validator of scenario sections: dataclasses whose field metadata says what a
valid value is (`rule`), and whose `__post_init__` checks the rules across their own keys
(raising `ConfigError`).

`from_mapping` walks such a dataclass, so a new key is one field with its rule, never new
parsing code. Errors are `InputError`s naming the file and the dotted key (exit 2, one line,
nothing written).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from harness.errors import InputError, shown


def rule(
    doc: str,
    *,
    choices: tuple[str, ...] | None = None,
    choices_fn: Callable[[], typing.Iterable[str]] | None = None,
    min: float | None = None,
    max: float | None = None,
    nonempty: bool = False,
) -> dict[str, Any]:
    """A field's metadata: what it means, and what a valid value is (`choices_fn`: the choices
    from a registry, asked for only when a value is checked)."""
    return {
        "doc": doc,
        "choices": choices,
        "choices_fn": choices_fn,
        "min": min,
        "max": max,
        "nonempty": nonempty,
    }


class ConfigError(ValueError):
    """A rule across keys that a configuration breaks: `key` is dotted, relative to the
    dataclass that raises it (a section's `__post_init__`), or to the scenario (a world's
    check). Python callers see a ValueError; a scenario file's reader names the file too."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


@dataclass
class Source:
    """Where values came from: the file, and which dotted keys `--set` overrode."""

    file: str
    overridden: frozenset[str] = frozenset()

    def label(self, key: str) -> str:
        # a key under an overridden mapping (`--set serving.spec={...}`) came from --set too
        parts = key.split(".")
        if any(".".join(parts[: i + 1]) in self.overridden for i in range(len(parts))):
            return f"{self.file} (--set)"
        return self.file


def fail(msg: str, src: Source, key: str) -> typing.NoReturn:
    raise InputError(msg, file=src.label(key), key=key)


def _type_name(tp: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
    if tp in names:
        return names[tp]
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    origin = typing.get_origin(tp)
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0]).removeprefix('an ').removeprefix('a ')}s"
    return str(tp)


def unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _check_scalar(value: Any, tp: Any, meta: dict[str, Any], src: Source, key: str) -> Any:
    if tp is bool:
        if not isinstance(value, bool):
            fail(f"expected true or false, got {shown(value)}", src, key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail(f"expected an integer, got {shown(value)}", src, key)
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail(f"expected a number, got {shown(value)}", src, key)
        value = float(value)
    elif tp is str:
        if not isinstance(value, str):
            fail(f"expected a string, got {shown(value)}", src, key)
        choices = meta.get("choices")
        if choices is None and meta.get("choices_fn") is not None:
            choices = tuple(meta["choices_fn"]())
        if choices is not None and value not in choices:
            near = difflib.get_close_matches(value, choices, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            fail(
                f"unknown value {shown(value)}{hint}; expected one of {', '.join(choices)}",
                src,
                key,
            )
        return value
    # NaN compares false with everything: without this it would pass every range check
    if not math.isfinite(value):
        fail(f"{value} is not a finite number", src, key)
    lo, hi = meta.get("min"), meta.get("max")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        fail(f"{shown(value)} out of range [{lo}, {hi}]", src, key)
    return value


def _check_value(value: Any, tp: Any, meta: dict[str, Any], src: Source, key: str) -> Any:
    tp, optional = unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        fail(f"expected {_type_name(tp)}, got null", src, key)
    if dataclasses.is_dataclass(tp):
        return from_mapping(tp, value, src, prefix=f"{key}.")
    if typing.get_origin(tp) is list:
        item_tp = typing.get_args(tp)[0]
        items = value if isinstance(value, list) else [value]  # a scalar is a one-item sweep
        if meta.get("nonempty") and not items:
            fail("must not be empty", src, key)
        if dataclasses.is_dataclass(item_tp):
            return [
                from_mapping(item_tp, v, src, prefix=f"{key}[{i}].") for i, v in enumerate(items)
            ]
        out = [_check_scalar(v, item_tp, meta, src, key) for v in items]
        if len(set(out)) != len(out):
            fail(f"duplicate entries in {shown(out)}", src, key)
        return out
    return _check_scalar(value, tp, meta, src, key)


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def unknown_key(
    key: str, known: list[str], src: Source, prefix: str, hints: typing.Sequence[str] = ()
) -> typing.NoReturn:
    """An unknown key, with the nearest known one (or `hints`) as a suggestion; shown escaped
    when it holds anything but printable ASCII (a zero-width space, a Cyrillic 'е'), which
    every known key is, so that it never reads as the key it is not."""
    if not hints:
        hints = [prefix + near for near in difflib.get_close_matches(key, known, n=1)]
    said = f" (did you mean {' or '.join(repr(h) for h in hints)}?)" if hints else ""
    plain = key.isascii() and key.isprintable()
    fail(
        f"unknown key{said}; known keys: {', '.join(known)}",
        src,
        prefix + (key if plain else ascii(key)),
    )


def from_mapping(cls: type, raw: Any, src: Source, prefix: str = "") -> Any:
    """Build dataclass `cls` from a parsed YAML mapping, validating every key; a rule its
    `__post_init__` checks (ConfigError) is reported at its dotted key."""
    key_name = prefix.rstrip(".") or "(top level)"
    if not isinstance(raw, dict):
        fail(f"expected a mapping, got {type(raw).__name__}", src, key_name)
    hints = typing.get_type_hints(cls)
    known = field_names(cls)
    for k in raw:
        if not isinstance(k, str) or k not in known:
            unknown_key(k if isinstance(k, str) else shown(k), known, src, prefix)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in raw:
            kwargs[f.name] = _check_value(
                raw[f.name], hints[f.name], f.metadata, src, prefix + f.name
            )
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        fail(exc.message, src, prefix + exc.key)


def type_at(cls: Any, parts: list[str], src: Source, prefix: str) -> Any:
    """The declared type at dotted key `parts` under dataclass `cls` (did-you-mean when
    unknown)."""
    for i, part in enumerate(parts):
        here = prefix + ".".join(parts[:i]) + ("." if i else "")
        if not dataclasses.is_dataclass(cls):
            fail("not a mapping; cannot set a sub-key", src, here.rstrip("."))
        if part not in field_names(cls):
            unknown_key(part, field_names(cls), src, here)
        cls, _ = unwrap_optional(typing.get_type_hints(cls)[part])
    return cls
