"""Printing to a terminal whose encoding cannot show every character the reports use (a
`PYTHONIOENCODING=ascii` shell, a C locale): "µs" is written "us", "Δ" "delta", and any other
such character escaped, instead of a UnicodeEncodeError after the work is done."""

from __future__ import annotations

import codecs
import sys
from typing import TextIO

ERRORS = "syncledger-plain"
# The reports' characters outside ASCII, as plain text.
PLAIN = {
    "µ": "u",
    "Δ": "delta",
    "…": "...",
    "—": "--",
    "–": "-",
    "·": "-",
    "×": "x",
    "±": "+/-",
    "≈": "~",
    "≤": "<=",
    "≥": ">=",
    "→": "->",
}


def _plain(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    text = "".join(PLAIN.get(c) or c.encode("ascii", "backslashreplace").decode() for c in bad)
    return text, exc.end


codecs.register_error(ERRORS, _plain)


def fit_stream(stream: TextIO) -> None:
    """Let `stream` write what its encoding cannot show as plain text (see the module doc)."""
    encoding = getattr(stream, "encoding", None)
    if not encoding or not hasattr(stream, "reconfigure"):
        return
    try:
        "".join(PLAIN).encode(encoding)
    except UnicodeEncodeError:
        stream.reconfigure(errors=ERRORS)
    except LookupError:  # an encoding Python does not know: nothing to fit
        return


def fit_console() -> None:
    """sys.stdout and sys.stderr, fitted (fit_stream)."""
    fit_stream(sys.stdout)
    fit_stream(sys.stderr)
