"""A verdict on sync counts against a reviewed reference: the gate's baselines (`harness gate`)
and a test suite's sync snapshots (`pytest --sync-snapshot`) alike.

A *suite* (a scenario, or one pytest session's snapshot file) holds *cases* (a scenario cell,
or a test), which change at *keys* (a region, a path, a cell's outcome). One rule compares a
key: more syncs is a regression, and each site with more events is named with its stack;
fewer syncs, or as many at other sites, is a change, which passes unless the tier is strict.
Sites are kept without line numbers, so code that moves changes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

STACK_LINES = 8
MAX_LINES = 40

# A case's status, worst last: a suite or verdict takes the worst of its cases'.
STATUSES = ("passed", "changed", "updated", "warned", "failed")


def site_file(location: str) -> str:
    """'path/x.py:120' -> 'path/x.py' (a location without a line number stays as it is)."""
    file, sep, line = location.rpartition(":")
    return file if sep and line.isdigit() else location


def signature(kind: str, op: str, location: str, function: str) -> str:
    """A sync site as baselines and snapshots keep it: no line number, so moved code does not
    churn the reviewed file."""
    return f"{kind} {op} in {function} ({site_file(location)})"


def frame_text(file: str, line: int, function: str) -> str:
    return f"{file}:{line} in {function}"


@dataclass(frozen=True)
class Change:
    """One difference from the reference. `old` / `new`: a sync count, a cell's outcome, or
    None where the key is absent on that side."""

    case: str
    key: str
    old: int | str | None
    new: int | str | None
    text: str  # one line, as every format shows it
    regression: bool  # more syncs, or a case that now fails: fails unless the tier is warn-only
    accepted: bool = False  # already written into the reference by this run (a new test)


@dataclass(frozen=True)
class NewSite:
    """A site with more events than the reference at one key: where it is now, and a stack."""

    case: str
    key: str
    site: str  # its signature
    where: tuple[str, ...]  # "kind op at file:line in function", each place it is now
    events: int
    stack: tuple[str, ...]


@dataclass
class Suite:
    name: str
    reference: str  # the file (or folder) compared with
    accept: str  # the command that accepts the changes on purpose
    cases: list[str] = field(default_factory=list)  # every case compared, changed or not
    changes: list[Change] = field(default_factory=list)
    new_sites: list[NewSite] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    keys: int = 0

    @property
    def regressions(self) -> list[str]:
        return [c.text for c in self.changes if c.regression]

    @property
    def differences(self) -> list[str]:
        """The changes that are not regressions (they pass unless the tier is strict)."""
        return [c.text for c in self.changes if not c.regression]

    def changes_of(self, case: str) -> list[Change]:
        return [c for c in self.changes if c.case == case]

    def sites_of(self, case: str) -> list[NewSite]:
        return [s for s in self.new_sites if s.case == case]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for a process boundary); `from_dict` reverses it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Suite:
        sites = [
            NewSite(**{**s, "where": tuple(s["where"]), "stack": tuple(s["stack"])})
            for s in d["new_sites"]
        ]
        return cls(
            **{k: v for k, v in d.items() if k not in ("changes", "new_sites")},
            changes=[Change(**c) for c in d["changes"]],
            new_sites=sites,
        )

    def absorb(self, other: Suite) -> None:
        """Add another process's part of the same suite (an xdist worker's)."""
        self.cases.extend(c for c in other.cases if c not in self.cases)
        self.changes.extend(other.changes)
        self.new_sites.extend(other.new_sites)
        self.notes.extend(n for n in other.notes if n not in self.notes)
        self.keys += other.keys


Locate = Callable[[str], tuple[tuple[str, ...], tuple[str, ...]]]


def compare_key(
    suite: Suite,
    case: str,
    key: str,
    key_text: str,
    old: tuple[int, Counter[str]],
    new: tuple[int, Counter[str]],
    locate: Locate,
    more: str = "",
) -> None:
    """Compare one key's (syncs, events by site) with the reference's and add what changed to
    `suite`. `locate(site)` gives where the site is now and a stack; `more` is appended to a
    regression's line (e.g. the growth per measured step)."""
    (was_n, was_ev), (now_n, now_ev) = old, new
    if now_n > was_n:
        suite.changes.append(
            Change(case, key, was_n, now_n, f"{key_text}: {was_n} -> {now_n} syncs{more}", True)
        )
        grown = (now_ev - was_ev) or now_ev
        for site, extra in grown.items():
            where, stack = locate(site)
            suite.new_sites.append(NewSite(case, key, site, where, extra, stack))
    elif now_n < was_n:
        text = f"{key_text}: {was_n} -> {now_n} syncs (fewer)"
        suite.changes.append(Change(case, key, was_n, now_n, text, False))
    elif now_ev != was_ev:
        added = ", ".join(sorted(now_ev - was_ev))
        gone = ", ".join(sorted(was_ev - now_ev))
        text = f"{key_text}: {now_n} syncs at other sites (now: {added}; before: {gone})"
        suite.changes.append(Change(case, key, was_n, now_n, text, False))


@dataclass(frozen=True)
class Tier:
    """What a difference does. `strict`: any change fails, not only regressions (CI, so a
    detector that goes blind cannot pass). `warn_only`: failures are reported and pass (a new,
    untrusted gate). `updating`: the reference is being rewritten to what was seen."""

    strict: bool = False
    warn_only: bool = False
    updating: bool = False

    def change_status(self, change: Change) -> str:
        if self.updating or change.accepted:
            return "updated"
        if change.regression or self.strict:
            return "warned" if self.warn_only else "failed"
        return "changed"

    def status(self, changes: Iterable[Change]) -> str:
        return max((self.change_status(c) for c in changes), key=STATUSES.index, default="passed")

    def describe(self) -> str:
        words = [w for w, on in (("strict", self.strict), ("warn-only", self.warn_only)) if on]
        return ", ".join(words + (["updating"] if self.updating else []))


@dataclass
class Verdict:
    tool: str  # "harness gate", "pytest --sync-snapshot"
    tier: Tier
    suites: list[Suite]

    def case_status(self, suite: Suite, case: str) -> str:
        return self.tier.status(suite.changes_of(case))

    def suite_status(self, suite: Suite) -> str:
        return self.tier.status(suite.changes)

    @property
    def status(self) -> str:
        return max(map(self.suite_status, self.suites), key=STATUSES.index, default="passed")

    @property
    def failed(self) -> bool:
        return self.status == "failed"


# ---- text ---------------------------------------------------------------------------------
def new_site_lines(sites: Sequence[NewSite], indent: str = "    ") -> list[str]:
    """Each new site once (events and keys summed over the cases given), with one stack."""
    merged: dict[str, list[Any]] = {}
    for s in sites:
        m = merged.setdefault(s.site, [s.where, 0, 0, s.stack])
        m[1] += s.events
        m[2] += 1
    lines = []
    for site, (where, n, k, stack) in sorted(merged.items()):
        lines.append(f"{indent}{'; '.join(where or (site,))}  (+{n} events at {k} key(s))")
        lines.extend(f"{indent}    {frame}" for frame in stack[:STACK_LINES])
    return lines


def _capped(items: list[str], indent: str = "    ") -> list[str]:
    lines = [f"{indent}{t}" for t in items[:MAX_LINES]]
    if len(items) > MAX_LINES:
        lines.append(f"{indent}... and {len(items) - MAX_LINES} more")
    return lines


def _word(status: str) -> str:
    return {"failed": "FAIL", "warned": "WARN (warn-only)"}.get(status, "ok")


def suite_text(verdict: Verdict, suite: Suite, label: str) -> str:
    """The report of one suite, for a terminal or a log."""
    tier = verdict.tier
    status = verdict.suite_status(suite)
    extra = f" ({tier.describe()})" if tier.describe() else ""
    lines = [
        f"{label} {suite.name}: {_word(status)} — {len(suite.cases)} cases, {suite.keys} keys, "
        f"{len(suite.regressions)} regressed, {len(suite.differences)} changed otherwise{extra}"
    ]
    lines.extend(f"  note: {note}" for note in suite.notes)
    lines.extend(_change_lines(tier, suite, suite.changes, suite.new_sites))
    return "\n".join(lines)


def case_text(verdict: Verdict, suite: Suite, case: str) -> str:
    """Why one case fails (or what changed in it): its changes, new sites and stacks."""
    changes, sites = suite.changes_of(case), suite.sites_of(case)
    worst = max(changes, key=lambda c: STATUSES.index(verdict.tier.change_status(c)))
    first = worst.text.removeprefix(case).lstrip(": ")
    new = f"; new: {'; '.join(sites[0].where or (sites[0].site,))}" if sites else ""
    lines = [f"sync snapshot: {first}{new}"]
    lines.extend(_change_lines(verdict.tier, suite, changes, sites))
    return "\n".join(lines)


def _change_lines(
    tier: Tier, suite: Suite, changes: list[Change], sites: list[NewSite]
) -> list[str]:
    ref, accept = suite.reference, suite.accept
    headings = {
        "regressed": f"REGRESSED vs {ref} (more syncs, or cases that now fail):",
        "failed": f"CHANGED vs {ref} (strict: any difference fails until the reference is "
        f"re-made on purpose with `{accept}`, and its diff reviewed):",
        "warned": f"WARNING vs {ref} (warn-only: reported, and passes):",
        "changed": f"fewer syncs or other differences from {ref}, which pass; it can be "
        f"tightened with `{accept}`:",
        "updated": f"accepted into {ref}:",
    }
    groups: dict[str, list[str]] = {h: [] for h in headings}
    for c in changes:
        groups[_group(tier, c)].append(c.text)
    regressions = [c for c in changes if c.regression]
    with_sites = _group(tier, regressions[0]) if regressions else ""
    lines = []
    for heading, texts in groups.items():
        if texts:
            lines.append(f"  {headings[heading]}")
            lines.extend(_capped(texts))
        if heading == with_sites and sites:
            lines.append("  new sync events (kind op at file:line in function), each with a stack:")
            lines.extend(new_site_lines(sites))
    if groups["regressed"] or groups["failed"] or groups["warned"]:
        lines.append(f"  accept them on purpose with `{accept}`, and review the diff")
    return lines


def _group(tier: Tier, change: Change) -> str:
    status = tier.change_status(change)
    return "regressed" if status == "failed" and change.regression else status
