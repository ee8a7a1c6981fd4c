"""An executed fidelity check written out: the table (table.md) and meta.json."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.fidelity import load_table
from harness.results.files import result_files, write_atomic, write_json
from harness.results.meta import device_info, git_info, utc_now
from harness.upstream.execute import Execution
from harness.upstream.report import Verdict, render


def output_files(out: Path) -> dict[str, Path]:
    """table.md and meta.json under `out`, declared before anything runs (exit 2 when one
    cannot be written, or must not be replaced)."""
    return result_files(out, ("table.md", "meta.json"))


def write_output(
    files: dict[str, Path],
    executions: Sequence[Execution],
    result: Verdict,
    args: argparse.Namespace,
    info: Any,
) -> None:
    """The `output_files`. ``measured_commit`` is the project commit whose model ran (the
    checkout's HEAD; committed evidence keeps it when the tree moves on)."""
    explained = load_table().executed_differences
    body = "\n\n".join(render(ex, explained.get(ex.label, {})) for ex in executions)
    write_atomic(files["table.md"], f"{body}\n\n{result.line()}\n")
    git = git_info()
    write_json(
        files["meta.json"],
        {
            "command": shlex.join(["python", "-m", "harness", *sys.argv[1:]]),
            "measured_commit": git["git_commit"],
            **git,
            **device_info(info.kind),
            "upstream": [{"tree": ex.label, "variant": ex.variant} for ex in executions],
            "verdict": result.line(),
            "created": utc_now(),
        },
    )
