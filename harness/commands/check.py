"""`python -m harness check NAME [OPTIONS]`: one of the registered checks (harness.checks);
`--all OUT`: every check that gives the GPU's verdict, each into OUT/NAME (`make gpu-check`);
`--list`: their names."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import command


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="the check to run (`--list` names them)")
    p.add_argument("options", nargs=argparse.REMAINDER, help="its own options (NAME --help)")
    p.add_argument("--all", metavar="OUT", type=Path, help="every check of `make gpu-check`")
    p.add_argument("--list", action="store_true", help="list the checks and exit")


@command(
    "check",
    help="run a check of the ledger, the backend or the emulated device (most need a GPU)",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.checks.registry import load_checks, run_check
    from harness.errors import InputError

    checks = load_checks()
    if args.list:
        for chk in checks.values():
            print(f"{chk.name:<15} {'in --all' if chk.in_all else '        '}  {chk.help}")
        return 0
    if args.all is not None:
        if args.name is not None:
            raise InputError("give a check's NAME or --all, not both", key="--all")
        return _run_all([c for c in checks.values() if c.in_all], args.all)
    if args.name is None:
        raise InputError("name a check or give --all OUT (--list names them)", key="NAME")
    if args.name not in checks:
        raise InputError(f"unknown check (known: {', '.join(checks)})", key=args.name)
    return run_check(checks[args.name], args.options)


def _run_all(chosen: list, out: Path) -> int:
    """Every chosen check, each into OUT/NAME, also after one failed; 1 when any failed."""
    from harness.checks.registry import run_check
    from harness.errors import InputError
    from syncledger.platform import cuda_present

    if not cuda_present():
        raise InputError("the GPU checks need a CUDA device and this machine has none", key="--all")
    failed = []
    for chk in chosen:
        where = out / chk.name
        print(f"== {chk.name}", flush=True)
        if run_check(chk, ["--out", str(where), *chk.with_all(where)]) != 0:
            failed.append(chk.name)
    print(f"checks failed: {', '.join(failed)}" if failed else "every check passed")
    return 1 if failed else 0
