"""`python -m harness syncs -- SCRIPT [ARGS...]`: any script under the ledger.

The script runs as `__main__` on the chosen device; code that says `"cuda"` runs on the emulated
device when that is chosen. The ledger records every thread of the process (`--thread-only`:
the main thread alone) and the children it forks; processes it starts otherwise are counted, not
followed. Its syncs are printed by location afterwards, with the detectors that saw them, also
when it fails:
an exception prints the script's own traceback and gives exit 1; `sys.exit(...)` keeps its code
(a message is printed and gives 1), as Python itself does.
"""

from __future__ import annotations

import argparse
import runpy
import sys
import traceback
from pathlib import Path
from types import TracebackType

import harness
from harness.commands import command
from harness.errors import InputError, stop_reason, stop_signal
from harness.results.files import write_atomic


def _configure(p: argparse.ArgumentParser) -> None:
    from harness.sync import DEVICE_KINDS

    p.add_argument(
        "--device",
        choices=DEVICE_KINDS,
        default="auto",
        help="auto: CUDA if present, else the emulated device",
    )
    p.add_argument(
        "--json", type=Path, help="also write the syncs, deduplicated by location, as JSON"
    )
    p.add_argument("--stack-depth", type=int, default=3, help="caller frames to print per location")
    p.add_argument(
        "--thread-only",
        action="store_true",
        help="record the main thread's syncs only (default: every thread of the process)",
    )
    p.add_argument("script", help="the Python script to run (its own arguments follow)")
    p.add_argument("script_args", nargs=argparse.REMAINDER)


def _script_frames(tb: TracebackType | None, script: Path) -> TracebackType | None:
    """The traceback from the script's first frame on (the launcher's frames are not its)."""
    target = str(script.resolve())
    while tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()) != target:
        tb = tb.tb_next
    return tb


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message"): Python prints it and exits 1
    return 1


def _run_script(script: Path) -> int:
    """Run the script as __main__; its exit code (1 with its traceback when it raises)."""
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: 128 + the signal, as a shell says
        signum = stop_signal(exc)
        print(stop_reason(signum), file=sys.stderr)
        return 128 + signum
    except Exception as exc:
        tb = _script_frames(exc.__traceback__, script) or exc.__traceback__
        traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
        return 1
    return 0


@command(
    "syncs",
    help="run a Python script under the sync ledger and list its syncs by location",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.runner.device import check_ledger_environment
    from harness.sync import SyncLedger, use_device
    from harness.sync.device import resolve_kind
    from harness.sync.events import skip_frames_of

    script = Path(args.script)
    if not script.is_file():
        raise InputError("no such script", file=str(script))
    try:
        kind = resolve_kind(args.device)
    except ValueError as exc:
        raise InputError(str(exc), key="--device") from None
    check_ledger_environment()
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    # the launcher's own frames are not where a script's syncs come from
    here = Path(harness.__file__).parent
    skip_frames_of(__file__, str(here / "cli.py"), str(here / "__main__.py"))
    saved_argv = sys.argv
    sys.argv = [str(script), *script_args]
    try:
        scope = "thread" if args.thread_only else "process"
        with use_device(kind) as info, SyncLedger(scope=scope) as ledger:
            code = _run_script(script)
    finally:
        sys.argv = saved_argv
    print(f"device: {info.kind} ({info.name}); {ledger.describe_detectors()}", file=sys.stderr)
    print(ledger.format_table(args.stack_depth))
    if args.json is not None:
        write_atomic(args.json, ledger.to_json())
    return code
