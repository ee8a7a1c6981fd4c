"""Names that become one path component (a scenario's run folders `<out>/<name>/<run-id>/`,
its baseline `<name>.json`): never a path, so nothing is written outside the folder asked for.
"""

from __future__ import annotations

import unicodedata

from harness.errors import InputError, shown

# room in NAME_MAX (255 bytes) for a suffix and a temporary file's name beside it
MAX_NAME_BYTES = 200


def component_problem(name: object) -> str | None:
    """Why `name` is not a single path component, or None when it is one."""
    if not isinstance(name, str):
        return f"expected a string, got {shown(name)}"
    if name in ("", ".", ".."):
        return f"{name!r} is not a name"
    if "/" in name or "\\" in name:
        return f"{shown(name)} is a path; a name is one path component (no / or \\)"
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in name):
        return f"{shown(name)} holds a control character"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"longer than {MAX_NAME_BYTES} bytes"
    return None


def check_component(name: object, *, file: str | None = None, key: str | None = None) -> str:
    """`name` if it is one path component; otherwise InputError (exit 2) naming file and key."""
    problem = component_problem(name)
    if problem is not None:
        raise InputError(problem, file=file, key=key)
    return name  # type: ignore[return-value]
