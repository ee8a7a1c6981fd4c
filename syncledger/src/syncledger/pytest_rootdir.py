"""Whether one of the plugin's path options moved pytest's rootdir.

pytest chooses its rootdir and configuration file before it loads plugins installed by entry
point, from the command line's free arguments. A plugin's option is unknown then, so its value
given as a word of its own (`--sync-snapshot-json ../out.json`) is taken for a test path when
that path exists, as an output does from its second run: pytest then roots the run above the
project and loses its configuration file, and the snapshots would be keyed and looked for
there. `--sync-snapshot-json=../out.json` (one word) is never taken for a path.
"""

from __future__ import annotations

import inspect
import itertools
import os
import shlex
from pathlib import Path

import pytest
from _pytest.config.findpaths import determine_setup

from syncledger.errors import InputError


def _words(config: pytest.Config) -> list[str]:
    """The words pytest chose its rootdir from (PYTEST_ADDOPTS come first)."""
    return shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + list(config.invocation_params.args)


def _rootdir(config: pytest.Config, args: list[str]) -> Path:
    """The rootdir pytest chooses for these free arguments and this run's other options."""
    given = {
        "inifile": config.option.inifilename,
        "args": args,
        "rootdir_cmd_arg": config.option.rootdir or None,
        "invocation_dir": config.invocation_params.dir,
        "override_ini": config.option.override_ini,  # pytest 9 and later
    }
    accepted = inspect.signature(determine_setup).parameters
    return determine_setup(**{k: v for k, v in given.items() if k in accepted})[0]


def check_rootdir(config: pytest.Config, options: tuple[str, ...]) -> None:
    """InputError (exit 2) when the value of one of `options` (flags), given as a word of its
    own, made pytest choose another rootdir than it would have without it."""
    words = _words(config)
    base = config.invocation_params.dir
    for flag, value in itertools.pairwise(words):
        if flag not in options or not (base / value).exists():
            continue
        without = _rootdir(config, list(config.option.file_or_dir or ()))
        if without != config.rootpath:
            raise InputError(
                f"pytest took the existing {value} for a test path (a plugin's options are "
                f"read after it chooses its rootdir) and rooted this run at {config.rootpath} "
                f"instead of {without}; write it as one word: {flag}={value}",
                key=flag,
            )
