"""A verdict for machines and pull requests: JSON, JUnit XML, and a Markdown table (printed
for a PR comment, or appended to GitHub Actions' job summary).

The same writers serve `harness gate` and `pytest --sync-snapshot`."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncledger.errors import InputError
from syncledger.outputs import OutputPlan, json_text, write_atomic
from syncledger.snapshot_verdict import MAX_LINES, Change, Suite, Verdict, new_site_lines

FORMAT = "harness-sync-verdict"
FORMAT_VERSION = 1
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


# ---- JSON ---------------------------------------------------------------------------------
def verdict_json(v: Verdict) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "tool": v.tool,
        "verdict": "failed" if v.failed else "passed",
        "status": v.status,
        "tier": {
            "strict": v.tier.strict,
            "warn_only": v.tier.warn_only,
            "updating": v.tier.updating,
        },
        "suites": [_suite_json(v, s) for s in v.suites],
    }


def _suite_json(v: Verdict, s: Suite) -> dict[str, Any]:
    return {
        "name": s.name,
        "reference": s.reference,
        "status": v.suite_status(s),
        "keys": s.keys,
        "accept": s.accept,
        "notes": s.notes,
        "cases": [
            {
                "name": case,
                "status": v.case_status(s, case),
                "changes": [
                    {k: getattr(c, k) for k in ("key", "old", "new", "regression", "text")}
                    for c in s.changes_of(case)
                ],
                "new_sites": [
                    {
                        "key": n.key,
                        "site": n.site,
                        "where": list(n.where),
                        "events": n.events,
                        "stack": list(n.stack),
                    }
                    for n in s.sites_of(case)
                ],
            }
            for case in s.cases
        ],
    }


# ---- JUnit --------------------------------------------------------------------------------
def junit_xml(v: Verdict) -> str:
    """One <testsuite> per suite, one <testcase> per case: a failure where the case fails, the
    report in <system-out> where it changed, was accepted or only warned."""
    root = ET.Element("testsuites", name=v.tool)
    totals = {"tests": 0, "failures": 0}
    for s in v.suites:
        statuses = {case: v.case_status(s, case) for case in s.cases}
        failures = sum(st == "failed" for st in statuses.values())
        el = ET.SubElement(
            root,
            "testsuite",
            name=s.name,
            tests=str(len(s.cases)),
            failures=str(failures),
            errors="0",
            skipped="0",
        )
        props = ET.SubElement(el, "properties")
        ET.SubElement(props, "property", name="reference", value=s.reference)
        for note in s.notes:
            ET.SubElement(props, "property", name="note", value=note)
        for case, status in statuses.items():
            classname, name = _junit_names(s.name, case)
            tc = ET.SubElement(el, "testcase", classname=classname, name=name)
            text = _case_report(s, case)
            if status == "failed":
                changes = s.changes_of(case)
                first = next((c for c in changes if c.regression), changes[0])
                message = first.text + (
                    f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
                )
                ET.SubElement(tc, "failure", message=message, type=f"sync.{status}").text = text
            elif status != "passed":
                ET.SubElement(tc, "system-out").text = f"{status}:\n{text}"
        totals["tests"] += len(s.cases)
        totals["failures"] += failures
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _junit_names(suite: str, case: str) -> tuple[str, str]:
    """A test id 'path.py::Class::test' -> ('path.py::Class', 'test'); a cell keeps its suite."""
    head, sep, tail = case.rpartition("::")
    return (head, tail) if sep else (suite, case)


def _case_report(s: Suite, case: str) -> str:
    lines = [c.text for c in s.changes_of(case)]
    sites = s.sites_of(case)
    if sites:
        lines.append("new sync events, each with a stack:")
        lines.extend(new_site_lines(sites, indent="  "))
    return "\n".join(lines)


# ---- Markdown -----------------------------------------------------------------------------
_SHOWN = {"failed": "fail", "warned": "warn", "changed": "note", "updated": "updated"}


def markdown(v: Verdict) -> str:
    """A table of what changed (one row per key), the new sites with their stacks folded."""
    status = {"failed": "FAILED", "warned": "passed with warnings (warn-only)"}.get(
        v.status, "passed"
    )
    tier = f" ({v.tier.describe()})" if v.tier.describe() else ""
    lines = [
        f"### {v.tool}: {status}{tier}",
        "",
        "| suite | compared with | cases | keys | changed | result |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for s in v.suites:
        cells = (s.name, f"`{s.reference}`", len(s.cases), s.keys, len({c.case for c in s.changes}))
        lines.append("| " + " | ".join(_cell(str(x)) for x in (*cells, v.suite_status(s))) + " |")
    rows = [(s, c) for s in v.suites for c in s.changes]
    if rows:
        lines += [
            "",
            "| result | suite | case | key | before | now |",
            "| --- | --- | --- | --- | ---: | ---: |",
        ]
        lines += [_row(v, s, c) for s, c in rows[:MAX_LINES]]
        if len(rows) > MAX_LINES:
            lines.append(f"| | | | … and {len(rows) - MAX_LINES} more (see the job's log) | | |")
    notes = [f"{s.name}: {n}" for s in v.suites for n in s.notes]
    if notes:
        lines += ["", *(f"- note: {_cell(n)}" for n in notes)]
    sites = [n for s in v.suites for n in s.new_sites]
    if sites:
        lines += [
            "",
            f"<details><summary>New sync sites ({len({n.site for n in sites})}), each with a "
            "stack</summary>",
            "",
            "```",
            *new_site_lines(sites, indent=""),
            "```",
            "</details>",
        ]
    accepts = sorted({s.accept for s in v.suites if s.changes})
    if accepts and not v.tier.updating:
        how = " or ".join(f"`{a}`" for a in accepts)
        lines += ["", f"To accept these changes on purpose: {how}, then review the diff."]
    return "\n".join(lines) + "\n"


def _row(v: Verdict, s: Suite, c: Change) -> str:
    cells = (_SHOWN[v.tier.change_status(c)], s.name, c.case, c.key, _value(c.old), _value(c.new))
    return "| " + " | ".join(_cell(str(x)) for x in cells) + " |"


def _value(x: int | str | None) -> str:
    return "—" if x is None else str(x)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# ---- writing ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Output:
    path: Path
    option: str  # the option or variable that named it, for error messages
    render: Callable[[Verdict], str]
    append: bool = False  # GitHub's job summary collects every step's Markdown


def outputs(
    json: Path | None,
    junit: Path | None,
    md: Path | None,
    options: tuple[str, str, str],
    plan: OutputPlan,
) -> list[Output]:
    """The files asked for (`options` names their flags), and the job summary of GitHub
    Actions when `GITHUB_STEP_SUMMARY` is set: each declared on `plan` (refused there, before
    any work, when it cannot be written or would land on an input or another output)."""
    asked = zip((json, junit, md), options, (_json_render, junit_xml, markdown))
    out = [Output(plan.write(p, option), option, render) for p, option, render in asked if p]
    summary = os.environ.get(STEP_SUMMARY)
    if summary:
        path = plan.write(summary, STEP_SUMMARY)
        try:  # GitHub's file exists already: it must take more
            with open(path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise InputError(f"cannot append ({reason})", file=summary, key=STEP_SUMMARY) from None
        out.append(Output(path, STEP_SUMMARY, markdown, append=True))
    return out


def _json_render(v: Verdict) -> str:
    return json_text(verdict_json(v))


def write_outputs(v: Verdict, outs: list[Output]) -> None:
    """Write each output; an OSError (a full disk) reaches the command line (exit 3)."""
    for o in outs:
        text = o.render(v)
        if o.append:
            try:
                with open(o.path, "a", encoding="utf-8") as f:
                    f.write(text)
            except OSError as exc:  # a failed write names no file: say which
                exc.filename = exc.filename or str(o.path)
                raise
        else:
            write_atomic(o.path, text)
