"""Sync snapshots in pytest: each test's syncs against the reviewed file, per region and site.

Registered by the plugin (`syncledger.pytest_plugin`) when `--sync-snapshot`,
`--sync-snapshot-update` or `--sync-snapshot-strict` is given. Each test runs on the plugin's
device (set-up, call and teardown, so fixtures may make device tensors); the syncs of its call
are counted, only those within the ini option `sync_within` when it is set. Only a test whose
call passed is compared or recorded: a failed, skipped or deselected test keeps its entry as it
was.

Under xdist each worker compares its own tests against the file and sends what it saw to the
controller, which alone writes the file and the outputs.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from syncledger.errors import EXIT_OPERATIONAL, EXIT_USAGE, InputError, os_error_text
from syncledger.events import SyncEvent
from syncledger.failures import SyncSnapshotMismatch
from syncledger.ledger import SyncLedger
from syncledger.outputs import OutputPlan
from syncledger.snapshot_file import Entry, apply_changes, entry_syncs, load_snapshots
from syncledger.snapshot_formats import Output, outputs, write_outputs
from syncledger.snapshot_verdict import (
    Change,
    Locate,
    Suite,
    Tier,
    Verdict,
    case_text,
    compare_key,
    frame_text,
    signature,
    site_file,
    suite_text,
)
from syncledger.within import resolve_within

TOOL = "pytest --sync-snapshot"
ACCEPT = "pytest --sync-snapshot-update"
WORKER_KEY = "syncledger_snapshot"  # this plugin's part of an xdist worker's output


@dataclass(frozen=True)
class SnapshotOptions:
    path: Path
    tier: Tier
    within: tuple[str, ...] = ()  # the ini option sync_within: count only syncs made there
    json: Path | None = None
    junit: Path | None = None
    markdown: Path | None = None

    @property
    def records(self) -> bool:
        """Whether the run may write the file (not in strict mode, which only checks)."""
        return not self.tier.strict


@dataclass
class Part:
    """What one process saw: the whole run without xdist, or one worker's share of it."""

    suite: Suite
    recorded: dict[str, Entry] = field(default_factory=dict)  # tests whose call passed
    collected: set[str] = field(default_factory=set)  # selected or deselected

    def to_json(self) -> str:
        return json.dumps(
            {
                "suite": self.suite.to_dict(),
                "recorded": self.recorded,
                "collected": sorted(self.collected),
            }
        )

    def absorb(self, text: str) -> None:
        d = json.loads(text)
        self.suite.absorb(Suite.from_dict(d["suite"]))
        self.recorded.update(d["recorded"])
        self.collected.update(d["collected"])


class SnapshotSession:
    """The pytest hooks of one session with sync snapshots on."""

    def __init__(
        self,
        config: pytest.Config,
        opts: SnapshotOptions,
        device: str,
    ) -> None:
        """Reads and checks the file, the scope and every output up front: InputError (exit 2)
        before any test runs. `device` is what the plugin runs the tests on."""
        self.config = config
        self.opts = opts
        self.device = device
        self.root = config.rootpath
        self.base = config.invocation_params.dir
        shown = _shown(opts.path, self.base)
        self.old = load_snapshots(opts.path, shown)
        if self.old is not None and self.old.device != device:
            raise InputError(
                f"recorded on device {self.old.device!r}, this run is on {device!r}: pass "
                f"--sync-device {self.old.device}, or --sync-snapshot-file for a file per device",
                file=shown,
                key="device",
            )
        if self.old is not None and self.old.within != opts.within:
            raise InputError(
                f"recorded within {list(self.old.within)}, this run counts within "
                f"{list(opts.within)} (the ini option sync_within): restore the option, or "
                "delete the file and record it again",
                file=shown,
                key="within",
            )
        try:
            self.within = resolve_within(opts.within, self.root) if opts.within else None
        except ValueError as exc:
            ini = _shown(config.inipath, self.base) if config.inipath else None
            raise InputError(
                str(exc).removeprefix("within: "), file=ini, key="sync_within"
            ) from None
        if self.old is None and opts.tier.strict:
            raise InputError(
                "no snapshot file to check against; record one with `pytest --sync-snapshot`, "
                "review it and commit it",
                file=shown,
            )
        plan = OutputPlan(self.base)  # the file is written when the run records
        (plan.write if opts.records else plan.read)(opts.path, "--sync-snapshot-file")
        self.outputs: list[Output] = outputs(
            opts.json,
            opts.junit,
            opts.markdown,
            ("--sync-snapshot-json", "--sync-snapshot-junit", "--sync-snapshot-markdown"),
            plan,
        )
        self.part = Part(Suite(shown, shown, ACCEPT))
        self.verdict: Verdict | None = None
        self.written = ""

    @property
    def _worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # ---- collection and runs --------------------------------------------------------------
    def pytest_itemcollected(self, item: pytest.Item) -> None:
        self.part.collected.add(item.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[object]:
        with SyncLedger() as ledger:
            result = yield  # a test that raises is neither compared nor recorded
        self._observe(item.nodeid, ledger.events)
        return result

    def _observe(self, test: str, events: list[SyncEvent]) -> None:
        entry, locate = self._entry(events)
        self.part.recorded[test] = entry
        suite, tier = self.part.suite, self.opts.tier
        suite.cases.append(test)
        before = len(suite.changes)
        old = self.old.tests.get(test) if self.old else None
        if old is None:
            n = entry_syncs(entry)
            text = (
                f"{test}: not in {suite.reference} ({n} syncs); record it with `{ACCEPT}`"
                if tier.strict
                else f"{test}: new test, {n} syncs (recorded)"
            )
            suite.changes.append(
                Change(test, "test", None, n, text, False, tier.updating or not tier.strict)
            )
        else:
            for region in sorted(set(old) | set(entry)):
                was, now = Counter(old.get(region, {})), Counter(entry.get(region, {}))
                key = f"region {region or '(none)'}"
                compare_key(
                    suite,
                    test,
                    key,
                    f"{test} {key}",
                    (was.total(), was),
                    (now.total(), now),
                    locate,
                )
                suite.keys += 1
        if tier.status(suite.changes[before:]) == "failed":
            raise SyncSnapshotMismatch(case_text(Verdict(TOOL, tier, [suite]), suite, test))

    def _entry(self, events: list[SyncEvent]) -> tuple[Entry, Locate]:
        """The test's syncs by region and site, and where each site is now (with a stack)."""
        bases = self._bases()
        entry: Entry = {}
        where: dict[str, list[str]] = {}
        stacks: dict[str, tuple[str, ...]] = {}
        for e in events:
            if not e.is_sync or (self.within is not None and not self.within.holds(e)):
                continue
            file, line = self._path(site_file(e.location), bases), e.location.rpartition(":")[2]
            site = signature(e.kind.value, e.op, file, e.function)
            sites = entry.setdefault(e.region, {})
            sites[site] = sites.get(site, 0) + 1
            here = f"{e.kind.value} {e.op} at {file}:{line} in {e.function}"
            if here not in where.setdefault(site, []):
                where[site].append(here)
            stacks.setdefault(
                site, tuple(frame_text(self._path(f, bases), ln, fn) for f, ln, fn in e.stack)
            )
        return entry, lambda site: (tuple(where.get(site, ())), stacks.get(site, ()))

    def _bases(self) -> list[Path]:
        """What files are kept relative to: the rootdir, else the longest import path entry
        that holds them (site-packages), so the file reads the same on every machine."""
        entries = sorted(map(Path, filter(None, sys.path)), key=lambda b: -len(str(b)))
        return [self.root, *entries]

    def _path(self, file: str, bases: list[Path]) -> str:
        if file.startswith("<"):
            return file
        p = Path(file) if Path(file).is_absolute() else self.base / file
        for base in bases:
            if p.is_relative_to(base):
                return p.relative_to(base).as_posix()
        return file

    # ---- the end of the session -----------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """xdist's controller: a worker is done; take its part."""
        text = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if text:
            self.part.absorb(text)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        with exit_on_input_error():
            self._finish(session, exitstatus)

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._worker:
            self.config.workeroutput[WORKER_KEY] = self.part.to_json()  # type: ignore[attr-defined]
            return
        suite, tier = self.part.suite, self.opts.tier
        stale = self._stale()
        for test in stale:
            n = entry_syncs(self.old.tests[test]) if self.old else 0
            text = f"{test}: stale: no longer collected (`{ACCEPT}` removes it)"
            suite.cases.append(test)
            suite.changes.append(Change(test, "test", n, None, text, False))
        self.verdict = Verdict(TOOL, tier, [suite])
        if exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
            self.written = "the session did not finish: no snapshot file or output written"
            return
        if self.opts.records:
            self._write(stale)
        write_outputs(self.verdict, self.outputs)
        if self.verdict.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write(self, stale: list[str]) -> None:
        tier, known = self.opts.tier, self.old.tests if self.old else {}
        recorded = self.part.recorded
        put = recorded if tier.updating else {t: e for t, e in recorded.items() if t not in known}
        drop = set(stale) if tier.updating else set()
        if put or drop:
            changed = apply_changes(
                self.opts.path, self.part.suite.reference, self.device, self.opts.within, put, drop
            )
        else:
            changed = False
        if not changed:
            self.written = f"{self.part.suite.reference} unchanged"
            return
        updated = sum(1 for t in put if t in known and known[t] != put[t])
        added = sum(1 for t in put if t not in known)
        self.written = (
            f"{self.part.suite.reference} written: {added} test(s) added, {updated} updated, "
            f"{len(drop)} removed"
        )

    def _stale(self) -> list[str]:
        """Entries whose test is gone: its file is gone, or its file was collected whole and
        the test was not in it. Entries of files this run did not collect are kept quietly."""
        if self.old is None:
            return []
        collected = self.part.collected
        files = {t.split("::", 1)[0] for t in collected}
        partial = set()
        for arg in self.config.args:
            if "::" in arg:
                partial.add(self._path(str(self.base / arg.split("::", 1)[0]), [self.root]))
        stale = []
        for test in self.old.tests:
            if test in collected:
                continue
            file = test.split("::", 1)[0]
            gone = not (self.root / file).exists()
            if gone or (file in files and file not in partial):
                stale.append(test)
        return sorted(stale)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.verdict is None:
            return
        tr = terminalreporter
        tr.section("sync snapshots")
        for line in suite_text(self.verdict, self.part.suite, "sync snapshots").splitlines():
            tr.line(line)
        if self.written:
            tr.line(self.written)


@contextmanager
def exit_on_input_error() -> Iterator[None]:
    """Bad input ends the session with one line and exit code 2, a failed write (a full disk)
    with one line and exit code 3, as the harness's commands do (pytest's own usage errors
    exit 4)."""
    try:
        yield
    except InputError as exc:
        pytest.exit(f"error: {exc}", returncode=EXIT_USAGE)
    except OSError as exc:
        pytest.exit(f"error: {os_error_text(exc)}", returncode=EXIT_OPERATIONAL)


def _shown(path: Path, base: Path) -> str:
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
