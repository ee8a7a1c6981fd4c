"""Reading a scenario's YAML (a file, or a `--set` value) strictly: UTF-8 only, plain scalars
by YAML 1.2's core schema (harness.scenario.yaml_schema), every key of a mapping once, and a
bounded size once aliases are expanded.

PyYAML lets the last of two equal keys win (a second `steps:` mapping silently drops the
first's keys) and builds an alias once however often it is used, so a few hundred bytes of
nested aliases stand for billions of values that only explode later, when something walks or
prints them. Here each of those is an InputError naming the file and the line.
"""

from __future__ import annotations

from typing import Any

import yaml

from harness.errors import InputError, shown
from harness.scenario.yaml_schema import Core12Constructor, Core12Resolver, Yaml11Number

MAX_FILE_BYTES = 1 << 20  # a scenario is a few hundred bytes
MAX_VALUES = 100_000  # values a document may stand for, each use of an alias counted again
MAX_DEPTH = 32  # nesting of mappings and lists (a scenario nests four deep)


class _DuplicateKey(yaml.constructor.ConstructorError):
    def __init__(self, key: Any, mark: yaml.Mark, first: yaml.Mark):
        super().__init__(problem=f"duplicate key {shown(key)}", problem_mark=mark)
        self.first = f"line {first.line + 1}"
        if first.line == mark.line:  # a flow mapping on one line: the columns tell them apart
            self.first += f", column {first.column + 1}; again at column {mark.column + 1}"


class StrictLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    Core12Constructor,
    Core12Resolver,
):
    """A safe loader that reads plain scalars by YAML 1.2's core schema (harness.scenario.
    yaml_schema) and refuses a key given twice in one mapping (merge keys, `<<`, may still be
    overridden: that is what they are for)."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        Core12Constructor.__init__(self)
        Core12Resolver.__init__(self)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[Any, yaml.Mark] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                seen = key in first
            except TypeError:  # an unhashable key: the base class says so
                continue
            if seen:
                raise _DuplicateKey(key, key_node.start_mark, first[key])
            first[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def decode_utf8(data: bytes, file: str) -> str:
    """The text of a scenario file; a byte that is not UTF-8 is reported with its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start]
        raise InputError(
            f"not UTF-8: byte 0x{byte:02x} at line {line}, column {column} ({exc.reason})",
            file=file,
        ) from None


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """'what is wrong at line N' of a YAML error, as short as PyYAML's own words allow."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        if 0xDC80 <= code <= 0xDCFF:  # a byte of a command line that is not UTF-8
            return f"not UTF-8: byte 0x{code - 0xDC00:02x} at line {line}"
        return f"not valid YAML at line {line}: character U+{code:04X} ({exc.reason})"
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or type(exc).__name__
    if isinstance(exc, _DuplicateKey):
        return f"{problem}{where} (first at {exc.first}): a key may appear once"
    if isinstance(exc, Yaml11Number):
        return (
            f"{problem}{where}: {exc.readings}; write the number you mean without leading "
            "zeros, underscores or colons, or quote it for text"
        )
    return f"not valid YAML{where}: {problem}"


def expanded_size(value: Any, limit: int = MAX_VALUES) -> tuple[int, int]:
    """How many values `value` stands for, each use of a shared (aliased) one counted again,
    and how deeply they nest; stops counting past `limit` (a recursive alias counts until it)."""
    todo, n, depth = [(value, 1)], 0, 0
    while todo and n <= limit:
        v, d = todo.pop()
        n, depth = n + 1, max(depth, d)
        if isinstance(v, dict):
            todo.extend((x, d + 1) for pair in v.items() for x in pair)
        elif isinstance(v, list):
            todo.extend((x, d + 1) for x in v)
    return n, depth


def parse_yaml(text: str, file: str, key: str | None = None) -> Any:
    """The value of one YAML document, strictly read (see the module docstring)."""
    try:
        loader = StrictLoader(text)  # checks every character already
        try:
            value = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise InputError(_yaml_problem(exc, text), file=file, key=key) from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", file=file, key=key) from None
    size, depth = expanded_size(value)
    if size > MAX_VALUES:
        raise InputError(
            f"expands to more than {MAX_VALUES:,} values (nested aliases?); a scenario needs "
            "a few dozen",
            file=file,
            key=key,
        )
    if depth > MAX_DEPTH:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", file=file, key=key)
    return value
