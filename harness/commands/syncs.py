"""`python -m harness syncs -- SCRIPT [ARGS...]`: any script under the ledger."""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import harness
from harness import cli
from harness.cli import command
from harness.errors import InputError
from harness.sync import DEVICE_KINDS, SyncLedger, use_device
from harness.sync.events import skip_frames_of


def _configure(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("script", help="the Python script to run (its own arguments follow)")
    p.add_argument("script_args", nargs=argparse.REMAINDER)


@command(
    "syncs",
    help="run a Python script under the sync ledger and list its syncs by location",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    script = Path(args.script)
    if not script.is_file():
        raise InputError("no such script", file=str(script))
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    # the launcher's own frames are not where a script's syncs come from
    skip_frames_of(__file__, cli.__file__, str(Path(harness.__file__).with_name("__main__.py")))
    saved_argv = sys.argv
    sys.argv = [str(script), *script_args]
    code = 0
    try:
        with use_device(args.device) as info, SyncLedger() as ledger:
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except ValueError as exc:
        raise InputError(str(exc), key="--device") from None
    finally:
        sys.argv = saved_argv
    print(f"device: {info.kind} ({info.name})", file=sys.stderr)
    print(ledger.format_table(args.stack_depth))
    if args.json is not None:
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(ledger.to_json())
        tmp.replace(args.json)
    return code
