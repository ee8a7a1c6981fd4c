"""The `python -m harness` subcommands: each module here registers one with `command`, and
the command line (harness.cli) builds its parser from `COMMANDS` after `load_commands()`.

A command module imports nothing heavy at import time (every command is loaded to list them):
what it needs — torch included — it imports in its `configure` and `run`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register `run(args) -> exit code` as subcommand `name`."""

    def wrap(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if name in COMMANDS:
            raise RuntimeError(f"command {name!r} registered twice")
        COMMANDS[name] = Command(name, help, configure, run)
        return run

    return wrap


def load_commands() -> dict[str, Command]:
    """Every command module of this package, imported (they register themselves)."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return COMMANDS
