"""The checks, each a command: `python -m harness check NAME [OPTIONS]` runs one,
`python -m harness check --all OUT` every one that gives the GPU's verdict (`make gpu-check`),
each into OUT/NAME. A check registers itself where it is defined, with `@check`; the command
finds them by importing every module of harness.checks."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Check:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Run
    in_all: bool  # part of `check --all`: the GPU's verdicts (`make gpu-check`)
    needs_cuda: bool  # refused, before anything is written, on a machine without CUDA
    # the options `--all` gives it beside `--out OUT/NAME` (e.g. where another check wrote)
    with_all: Callable[[Path], list[str]]


CHECKS: dict[str, Check] = {}


def check(
    name: str,
    help: str,
    *,
    configure: Callable[[argparse.ArgumentParser], None],
    in_all: bool = True,
    needs_cuda: bool = False,
    with_all: Callable[[Path], list[str]] = lambda out: [],
) -> Callable[[Run], Run]:
    """Register `run(args) -> exit code` as check `name`; `configure` adds its options (each
    has `--out`)."""

    def register(run: Run) -> Run:
        if name in CHECKS:
            raise RuntimeError(f"check {name!r} registered twice")
        CHECKS[name] = Check(name, help, configure, run, in_all, needs_cuda, with_all)
        return run

    return register


def load_checks() -> dict[str, Check]:
    """Every check, by name, in the order of their modules' names."""
    from harness import checks

    for info in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"{checks.__name__}.{info.name}")
    return CHECKS


def run_check(chk: Check, argv: list[str]) -> int:
    """Check `chk` with these options; one that needs CUDA is refused without it (exit 2)."""
    from harness.errors import InputError
    from syncledger.platform import cuda_present

    try:
        args = parser_of(chk).parse_args(argv)
    except SystemExit as exc:  # its --help (0), or a usage error already said in one line (2)
        return int(exc.code or 0)
    if chk.needs_cuda and not cuda_present():
        raise InputError(
            "needs a CUDA device and this machine has none; nothing was run", key=chk.name
        )
    return chk.run(args)


def parser_of(chk: Check) -> argparse.ArgumentParser:
    from harness.errors import EXIT_CODES, OneLineParser

    p = OneLineParser(
        prog=f"python -m harness check {chk.name}", description=chk.help, epilog=EXIT_CODES
    )
    chk.configure(p)
    return p
