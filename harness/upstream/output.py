"""An executed fidelity check written out: the table (table.md) and meta.json."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from harness.results.files import result_files, write_atomic, write_json
from harness.results.meta import device_info, git_info, utc_now, versions
from syncledger import cupti


def output_files(out: Path) -> dict[str, Path]:
    """table.md and meta.json under `out`, declared before anything runs (exit 2 when one
    cannot be written, or must not be replaced)."""
    return result_files(out, ("table.md", "meta.json"))


def write_output(
    files: dict[str, Path], body: str, verdict: str, upstream: list[dict[str, Any]], info: Any
) -> None:
    """The `output_files`: the table (`body`) and meta.json. ``measured_commit`` is the project
    commit whose model ran (the checkout's HEAD; committed evidence keeps it when the tree moves
    on)."""
    git = git_info()  # before writing: a re-run overwrites committed tables
    write_atomic(files["table.md"], body)
    write_json(
        files["meta.json"],
        {
            "command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]),
            "measured_commit": git["git_commit"],
            **git,
            **device_info(info.kind),
            **versions(),
            "cupti": cupti.status() if info.kind == "cuda" else None,
            "upstream": upstream,
            "verdict": verdict,
            "created": utc_now(),
        },
    )
