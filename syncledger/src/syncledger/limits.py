"""What the emulated device cannot run, said in one line at the program's own line.

The emulated device raises `EmulationError` with a message that names the feature (and what to
do instead); a traceback through the emulation's machinery would bury it. The pytest plugin
and the command line show it as `file:line: message`.
"""

from __future__ import annotations

import sys

from syncledger.events import is_machinery


def limit_line(exc: BaseException) -> str | None:
    """`file:line: message` for an `EmulationError`, at the innermost frame of the program's
    own code; None for any other exception."""
    emulated = sys.modules.get("syncledger.emulated.tensor")  # not imported: none was raised
    if emulated is None or not isinstance(exc, emulated.EmulationError):
        return None
    where = None
    tb = exc.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if not is_machinery(file):
            where = f"{file}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{where}: {exc}" if where else str(exc)
