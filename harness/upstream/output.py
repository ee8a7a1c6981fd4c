"""An executed fidelity check written out: the table (table.md) and meta.json."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.fidelity import load_table
from harness.results.files import check_writable, write_atomic, write_json
from harness.results.meta import device_info, git_info, utc_now
from harness.upstream.execute import Execution
from harness.upstream.report import Verdict, render


def write_output(
    out: Path, executions: Sequence[Execution], result: Verdict, args: argparse.Namespace, info: Any
) -> None:
    """table.md and meta.json under `out`. ``measured_commit`` is the project commit whose model
    ran (the checkout's HEAD; committed evidence keeps it when the tree moves on)."""
    check_writable(out, "--out")
    explained = load_table().executed_differences
    body = "\n\n".join(render(ex, explained.get(ex.label, {})) for ex in executions)
    write_atomic(out / "table.md", f"{body}\n\n{result.line()}\n")
    git = git_info()
    write_json(
        out / "meta.json",
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
