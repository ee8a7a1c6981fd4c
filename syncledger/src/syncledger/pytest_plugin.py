"""pytest integration: a `sync_ledger` fixture, a `@pytest.mark.max_syncs(n, kinds=None,
within=None)` marker, and sync snapshots (`--sync-snapshot`, see `syncledger.snapshot_session`).

A test that uses any of them runs on the device `--sync-device auto|cuda|emu` names (default
`auto`: CUDA when present, else the emulated device, where code that says `"cuda"` runs on the
CPU), as `python -m syncledger` does, from the start of its set-up to the end of its teardown,
whatever the order of its fixtures: a fixture that asks `torch.cuda.is_available()` gets the
emulated GPU. The budget and the fixture's ledger count the test's call. A budgeted test that
put no tensor on the device measured nothing: it is reported (a warning; a failure under
`--sync-strict`), never passed quietly. The pytest header says the device once, and with
`auto` the summary says which the tests ran on.

pytest loads the plugin in every run of an environment that has the ledger installed, so it
imports torch and asks for a device only when a test uses the ledger (or snapshots are on):
asking starts the CUDA driver, after which no child that a test forks can use CUDA.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from syncledger.device import DEVICE_KINDS, resolve_kind
from syncledger.errors import InputError
from syncledger.events import skip_frames_of, skip_frames_under
from syncledger.failures import (
    SyncBudgetExceeded,
    SyncMarkerError,
    SyncMeasuredNothing,
    SyncMeasuredNothingWarning,
    SyncSnapshotMismatch,
)
from syncledger.limits import limit_line
from syncledger.snapshot_file import DEFAULT_NAME
from syncledger.snapshot_verdict import Tier

if TYPE_CHECKING:
    from syncledger.ledger import SyncLedger, max_syncs
    from syncledger.snapshot_session import SnapshotOptions, SnapshotSession

_WANTED = pytest.StashKey[str]()  # --sync-device
_DEVICE = pytest.StashKey[str]()  # what it resolved to, once asked
_SNAPSHOTS: pytest.StashKey[SnapshotSession | None] = pytest.StashKey()
# on a test: the device it ran on, the device's allocations before its set-up, the marker's
# budget and the fixture's ledger (both opened around its call)
_RAN_ON = pytest.StashKey[str]()
_ALLOCATIONS = pytest.StashKey[int]()
_BUDGET: pytest.StashKey[max_syncs] = pytest.StashKey()
_LEDGER: pytest.StashKey[SyncLedger] = pytest.StashKey()
_ON = {"emu": "the emulated device (CPU; code that says 'cuda' runs there)", "cuda": "CUDA"}
MODES = ("sync_snapshot", "sync_snapshot_update", "sync_snapshot_strict")
# the options that take effect only with one of MODES
EXTRAS = tuple(f"sync_snapshot_{e}" for e in ("file", "warn_only", "json", "junit", "markdown"))
# the options that name a file: pytest may take an existing one for a test path
PATH_FLAGS = tuple(f"--sync-snapshot-{e}" for e in ("file", "json", "junit", "markdown"))
# The frames of the test runner are never what caused a sync: stacks start at the test.
RUNNER_PACKAGES = ("_pytest", "pytest", "pluggy", "xdist", "execnet")
# failures the plugin raises, shown as their message (the syncs, their sites and stacks)
# rather than as a traceback through the plugin (a budget's too, when it is the marker's)
OWN_FAILURES = (SyncSnapshotMismatch, SyncMeasuredNothing, SyncMarkerError)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("syncledger")
    group.addoption(
        "--sync-device",
        choices=DEVICE_KINDS,
        default="auto",
        help="device for tests using sync_ledger / max_syncs / sync snapshots (auto: CUDA if "
        "present, else the emulated device)",
    )
    group.addoption(
        "--sync-strict",
        action="store_true",
        help="a test using sync_ledger or max_syncs that put no tensor on the device fails "
        "(default: a warning)",
    )
    group.addoption(
        "--sync-snapshot",
        action="store_true",
        help="compare each test's host-device syncs with the snapshot file: more syncs fail, "
        "fewer pass with a note; tests not in the file are added to it",
    )
    group.addoption(
        "--sync-snapshot-update",
        action="store_true",
        help="rewrite the snapshot entries of the tests that pass, and drop stale ones",
    )
    group.addoption(
        "--sync-snapshot-strict",
        action="store_true",
        help="any difference from the snapshot file fails (CI); the file is never written",
    )
    group.addoption(
        "--sync-snapshot-warn-only",
        action="store_true",
        help="report what would fail, and pass",
    )
    group.addoption(
        "--sync-snapshot-file",
        type=Path,
        metavar="PATH",
        help=f"the snapshot file (default: {DEFAULT_NAME} in the rootdir)",
    )
    for fmt, name in (("json", "JSON"), ("junit", "JUnit XML"), ("markdown", "Markdown")):
        group.addoption(
            f"--sync-snapshot-{fmt}",
            type=Path,
            metavar="FILE",
            help=f"write the snapshots' verdict as {name}",
        )
    parser.addini(
        "sync_within",
        type="args",
        default=[],
        help="sync snapshots count only syncs whose stack passes through these packages or "
        "paths (relative to the rootdir), e.g. the package under test",
    )


@pytest.hookimpl(tryfirst=True)  # bad input is then one line, before the terminal reporter starts
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "max_syncs(n, kinds=None, within=None): fail when the test makes more than n "
        "host-device syncs (of these kinds; whose stack passes through these packages or paths)",
    )
    skip_frames_under(*(os.path.dirname(m.__file__) for m in _runner_modules()))
    if os.path.isfile(sys.argv[0]):
        skip_frames_of(sys.argv[0])  # the `pytest` launcher script
    # a plugin registered late (from a conftest) has no option: its default then applies
    wanted = config.getoption("sync_device", default="auto")
    config.stash[_WANTED] = wanted
    config.stash[_SNAPSHOTS] = None
    snapshots_asked = bool(_given(config, (*MODES, *EXTRAS)))
    if wanted != "auto" or snapshots_asked:
        _device(config)  # a device asked for, or the snapshots' part, is checked up front
    if not snapshots_asked:
        return
    from syncledger.pytest_rootdir import check_rootdir
    from syncledger.snapshot_session import SnapshotSession, exit_on_input_error

    # the snapshot file and the outputs are checked before any worker starts or test runs
    with exit_on_input_error():
        if not hasattr(config, "workerinput"):  # xdist's controller checks before they start
            check_rootdir(config, PATH_FLAGS)
        opts = snapshot_options(config)
        if opts is not None and not config.option.collectonly:
            snapshots = SnapshotSession(config, opts, _device(config))
            config.stash[_SNAPSHOTS] = snapshots
            config.pluginmanager.register(snapshots, "syncledger_snapshots")


def _device(config: pytest.Config) -> str:
    """The device the ledger's tests run on, "cuda" or "emu", chosen the first time it is asked
    for."""
    if _DEVICE not in config.stash:
        wanted = config.stash[_WANTED]
        try:
            config.stash[_DEVICE] = resolve_kind(wanted)
        except ValueError as exc:
            raise pytest.UsageError(f"--sync-device {wanted}: {exc}") from None
    return config.stash[_DEVICE]


def _given(config: pytest.Config, options: tuple[str, ...]) -> list[str]:
    """The options (by their dest names) given a value on the command line."""
    return [o for o in options if config.getoption(o, default=None)]


def _runner_modules() -> list:
    return [
        sys.modules[name]
        for name in RUNNER_PACKAGES
        if getattr(sys.modules.get(name), "__file__", None)
    ]


def snapshot_options(config: pytest.Config) -> SnapshotOptions | None:
    """The snapshot options, checked; None when snapshots are off."""
    on = _given(config, MODES)
    given = _given(config, EXTRAS)
    if not on:
        if given:
            flags = ", ".join(f"--{o.replace('_', '-')}" for o in given)
            raise InputError(
                f"{flags}: takes effect only with --sync-snapshot, --sync-snapshot-update or "
                "--sync-snapshot-strict"
            )
        return None
    from syncledger.snapshot_session import SnapshotOptions

    if "sync_snapshot_update" in on and "sync_snapshot_strict" in on:
        raise InputError("--sync-snapshot-update and --sync-snapshot-strict: choose one")
    # pytest is back in the invocation folder when the outputs are written, not always before
    file = config.getoption("sync_snapshot_file", default=None)
    return SnapshotOptions(
        path=config.invocation_params.dir / file if file else config.rootpath / DEFAULT_NAME,
        tier=Tier(
            strict="sync_snapshot_strict" in on,
            warn_only=bool(config.getoption("sync_snapshot_warn_only", default=False)),
            updating="sync_snapshot_update" in on,
        ),
        within=tuple(config.getini("sync_within")),
        json=config.getoption("sync_snapshot_json", default=None),
        junit=config.getoption("sync_snapshot_junit", default=None),
        markdown=config.getoption("sync_snapshot_markdown", default=None),
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    if _DEVICE not in config.stash:
        where = f"CUDA when this machine has a GPU, else on {_ON['emu']}; the summary says which"
    elif config.stash[_DEVICE] == "emu":
        where = _ON["emu"]
    else:
        import torch

        where = f"CUDA ({torch.cuda.get_device_name()})"
    lines = [f"sync ledger: tests using sync_ledger or max_syncs run on {where}"]
    session = config.stash[_SNAPSHOTS]
    if session is not None:
        tier = session.opts.tier.describe() or "record new tests"
        scope = f", counting syncs within {', '.join(session.opts.within)}"
        lines.append(
            f"sync snapshots: every test on device {session.device}, against "
            f"{session.part.suite.reference} ({tier}){scope if session.opts.within else ''}"
        )
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under `auto` with no snapshots the header could not say the device without asking for
    it; the tests that used the ledger (under xdist, in the workers) say which it was."""
    config = terminalreporter.config
    if config.stash[_WANTED] != "auto" or config.stash[_SNAPSHOTS] is not None:
        return
    ran = Counter(
        getattr(report, "sync_device", None)
        for reports in terminalreporter.stats.values()
        for report in reports
    )
    ran.pop(None, None)
    for kind, n in sorted(ran.items()):
        tests = "1 test" if n == 1 else f"{n} tests"
        terminalreporter.write_line(f"sync ledger: {tests} ran on {_ON[kind]}")


def _budgeted(item: pytest.Item) -> bool:
    """Whether the test uses the marker or the fixture (also through another fixture)."""
    fixtures = getattr(item, "fixturenames", ())
    return item.get_closest_marker("max_syncs") is not None or "sync_ledger" in fixtures


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """Set-up, call and teardown of a test that uses the ledger run on its device."""
    config = item.config
    if config.stash[_SNAPSHOTS] is None and not _budgeted(item):
        return (yield)
    kind = item.stash[_RAN_ON] = _device(config)
    with contextlib.ExitStack() as device:
        if kind == "emu":
            from syncledger.emulated import emulated_device

            device.enter_context(emulated_device())
        from syncledger.allocations import allocations

        item.stash[_ALLOCATIONS] = allocations(kind)
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The marker's budget, made before any fixture: bad arguments fail the test in one line."""
    marker = item.get_closest_marker("max_syncs")
    if marker is None:
        return
    from syncledger.ledger import max_syncs

    within = marker.kwargs.get("within")
    kwargs = dict(marker.kwargs)
    try:
        if within is not None:  # a marker's paths are the project's: relative to the rootdir
            from syncledger.within import resolve_within

            kwargs["within"] = resolve_within(within, item.config.rootpath)
        item.stash[_BUDGET] = max_syncs(*marker.args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise SyncMarkerError(f"{marker.name} marker: {exc}") from None


@pytest.fixture
def sync_ledger(request: pytest.FixtureRequest) -> SyncLedger:
    """A ledger of the test's call: open while the test function runs (not its fixtures), on
    the device of `--sync-device`."""
    from syncledger.ledger import SyncLedger

    ledger = request.node.stash[_LEDGER] = SyncLedger()
    return ledger


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[object]:
    budget = item.stash.get(_BUDGET, None)
    fixture = item.stash.get(_LEDGER, None)
    if budget is None and fixture is None:
        return (yield)
    with contextlib.ExitStack() as opened:
        ledgers = [opened.enter_context(fixture)] if fixture is not None else []
        if budget is not None:
            ledgers.append(opened.enter_context(budget))
        result = yield  # a test that raises is not checked
    _check_measured(item, ledgers, "max_syncs" if budget is not None else "sync_ledger")
    return result


def _check_measured(item: pytest.Item, ledgers: list[SyncLedger], what: str) -> None:
    """A budget that saw no sync and no tensor made on its device could not have failed."""
    from syncledger.allocations import allocations

    kind = item.stash[_RAN_ON]
    if any(led.events for led in ledgers) or allocations(kind) != item.stash[_ALLOCATIONS]:
        return
    device = "the emulated device" if kind == "emu" else "the GPU"
    message = (
        f"{what} measured nothing: no tensor was made on {device} during the test's set-up or "
        "call, so no sync could be seen (are its tensors on the CPU? make them on 'cuda')"
    )
    if item.config.getoption("sync_strict", default=False):
        raise SyncMeasuredNothing(message)
    item.warn(SyncMeasuredNothingWarning(message))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[object]:
    """A failure the plugin raised shows its message (the syncs, their sites and stacks), not a
    traceback through the plugin; what the emulated device cannot run, one line at the test's
    own line."""
    report = yield
    if call.when == "call" and _RAN_ON in item.stash:
        report.sync_device = item.stash[_RAN_ON]  # type: ignore[attr-defined]
    exc = call.excinfo
    if exc is None:
        return report
    if exc.errisinstance(OWN_FAILURES) or (
        exc.errisinstance(SyncBudgetExceeded) and _BUDGET in item.stash
    ):
        report.longrepr = str(exc.value)
    elif (line := limit_line(exc.value)) is not None:
        report.longrepr = line
    return report
