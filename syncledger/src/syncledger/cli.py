"""`syncledger [OPTIONS] SCRIPT [ARGS...]` (or `python -m syncledger`): any script under the
ledger.

The script runs as `__main__` on the chosen device; code that says `"cuda"` runs on the emulated
device when that is chosen. The ledger records every thread of the process (`--thread-only`:
the main thread alone) and the children it forks; processes it starts otherwise are counted, not
followed. As Python does at exit, the command waits for the threads the script started that
are not daemons; a daemon thread still running then is named, as its later syncs are not in the
ledger. Its syncs are printed by location afterwards, once (a forked child that returns from the
script prints nothing: the parent merges its syncs), with the detectors that saw them, also
when it fails: an exception prints the script's own traceback and gives exit 1 (what the
emulated device cannot run, one line at the script's line); `sys.exit(...)` keeps its code (a
message is printed and gives 1), as Python itself does. `--json` is relative to where the
command started, wherever the script moves.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import threading
import traceback
from pathlib import Path
from types import TracebackType

import syncledger
from syncledger.device import DEVICE_KINDS
from syncledger.errors import InputError, OneLineParser, exit_code, stop_reason, stop_signal
from syncledger.limits import limit_line
from syncledger.outputs import OutputPlan, write_atomic

EXIT_CODES = (
    "exit codes: the script's own, 1 when it raises, 2 bad input or usage, 3 the environment "
    "failed (disk full, unwritable file, bad environment variable), 130 Ctrl-C, 143 SIGTERM"
)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="syncledger",
        description="run a Python script under the sync ledger and list its syncs by location",
        epilog=EXIT_CODES,
    )
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
    return p


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
        line = limit_line(exc)
        if line is not None:
            print(line, file=sys.stderr)
            return 1
        tb = _script_frames(exc.__traceback__, script) or exc.__traceback__
        traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
        return 1
    return 0


def _join_threads(before: set[threading.Thread], code: int) -> tuple[int, list[str]]:
    """Wait, as Python does at exit, for the threads the script started that are not daemons
    (and the ones they start); the exit code (128 + N if signal N stops the wait), and the
    names of the script's daemon threads still running."""
    try:
        while waiting := [
            t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()
        ]:
            for t in waiting:
                t.join()
    except KeyboardInterrupt as exc:
        signum = stop_signal(exc)
        print(stop_reason(signum), file=sys.stderr)
        code = 128 + signum
    running = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    return code, running


def run(args: argparse.Namespace) -> int:
    """Run `args.script` under a ledger; the script's exit code."""
    from syncledger import SyncLedger, use_device
    from syncledger.device import check_environment, resolve_kind
    from syncledger.events import skip_frames_of

    script = Path(args.script)
    if not script.is_file():
        raise InputError("no such script", file=str(script))
    plan = OutputPlan()  # here, before the script may change the working folder
    plan.read(script, "SCRIPT")
    json_out = plan.write(args.json, "--json") if args.json is not None else None
    try:
        kind = resolve_kind(args.device)
    except ValueError as exc:
        raise InputError(str(exc), key="--device") from None
    check_environment()
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    # the launcher's own frames are not where a script's syncs come from
    skip_frames_of(__file__, str(Path(syncledger.__file__).with_name("__main__.py")))
    saved_argv = sys.argv
    sys.argv = [str(script), *script_args]
    pid, before = os.getpid(), set(threading.enumerate())
    try:
        scope = "thread" if args.thread_only else "process"
        with use_device(kind) as info, SyncLedger(scope=scope) as ledger:
            code, running = _join_threads(before, _run_script(script))
    finally:
        sys.argv = saved_argv
    if os.getpid() != pid:  # a forked child that returned from the script: its parent reports
        return code
    print(f"device: {info.kind} ({info.name}); {ledger.describe_detectors()}", file=sys.stderr)
    if running:
        print(
            f"note: {len(running)} daemon thread(s) of the script still running at its end "
            f"({', '.join(running)}): what they sync afterwards is not counted",
            file=sys.stderr,
        )
    print(ledger.format_table(args.stack_depth))
    if json_out is not None:
        write_atomic(json_out, ledger.to_json())
    return code


def main(argv: list[str] | None = None) -> int:
    return exit_code(lambda: run(build_parser().parse_args(argv)))
