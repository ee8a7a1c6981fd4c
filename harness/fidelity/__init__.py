"""The fidelity table: every upstream sync point beside the project line that reproduces it.

The table lives in ``upstream_syncs.yaml``; a project line takes part by carrying the comment
``# fidelity: <row id>``. ``anchors()`` finds those lines, so the table never holds line numbers
of the project that could go stale. It has a column per declared variant (harness.variants:
the commit each models), and every row must describe each: a variant the table does not
describe is refused when the table is read, never left unchecked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import InputError
from harness.variants import VARIANTS, variant_names

TABLE = Path(__file__).with_name("upstream_syncs.yaml")
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # harness/
REPO_ROOT = PACKAGE_ROOT.parent
_ANCHOR = re.compile(r"#\s*fidelity:\s*([A-Z]\d+[a-z]?)\b")


@dataclass(frozen=True)
class Reach:
    """What exercises a row: a scenario run (and what each named variant shows there), or an
    in-process probe of code that runs in processes of its own (and what each of its cases
    shows)."""

    scenario: str | None
    overrides: tuple[str, ...]
    expect: dict[str, str]  # variant or case -> sync kind, "none", or an exception type name
    probe: str | None = None


@dataclass(frozen=True)
class Row:
    id: str
    what: str
    upstream: dict[str, Any]
    reach: Reach | None = None
    unreachable: str | None = None


@dataclass(frozen=True)
class Table:
    rows: list[Row]
    out_of_scope: list[dict[str, str]] = field(default_factory=list)
    # release or tree label -> executed cell -> why upstream's run differs from the model there
    executed_differences: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def commits(self) -> dict[str, str]:
        """Variant -> the upstream commit its column describes."""
        return {name: v.commit for name, v in VARIANTS.items()}


def load_table(path: Path = TABLE) -> Table:
    data = yaml.safe_load(path.read_text())
    rows = []
    for r in data["rows"]:
        missing = [v for v in variant_names() if v not in r["upstream"]]
        if missing:
            raise InputError(
                f"row {r['id']} does not describe variant(s) {', '.join(missing)} (each "
                "declared variant needs its upstream line in every row)",
                file=str(path),
                key=f"rows.{r['id']}.upstream.{missing[0]}",
            )
        reach = r.get("reach")
        rows.append(
            Row(
                id=r["id"],
                what=r["what"],
                upstream=r["upstream"],
                reach=None if reach is None else _reach(reach),
                unreachable=r.get("unreachable"),
            )
        )
    return Table(
        rows,
        data.get("out_of_scope", []),
        data.get("executed_differences") or {},
    )


def _reach(reach: dict[str, Any]) -> Reach:
    return Reach(
        reach.get("scenario"),
        tuple(reach.get("set", ())),
        dict(reach["expect"]),
        reach.get("probe"),
    )


def anchors(root: Path = PACKAGE_ROOT) -> dict[str, list[tuple[str, int]]]:
    """Row id -> the project lines (repo-relative file, line) that carry its anchor."""
    out: dict[str, list[tuple[str, int]]] = {}
    for path in sorted(root.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            m = _ANCHOR.search(line)
            if m:
                rel = str(path.relative_to(REPO_ROOT))
                out.setdefault(m.group(1), []).append((rel, n))
    return out


def render_markdown(table: Table, found: dict[str, list[tuple[str, int]]]) -> str:
    """The table as Markdown: upstream per commit beside the project's current file:line."""
    columns = [f"{v} ({commit})" for v, commit in table.commits.items()]
    head = f"| id | what | upstream | {' | '.join(columns)} | project | reached by |"
    lines = [head, "|" + " --- |" * (len(columns) + 5)]
    for r in table.rows:
        cells = []
        for v in table.commits:
            u = r.upstream[v]
            where = f"{u['line']}" if u.get("line") else "-"
            cells.append(f"{where}: {u['effect']}")
        project = ", ".join(f"{f}:{n}" for f, n in found.get(r.id, [])) or "-"
        if r.reach is not None and r.reach.probe is not None:
            reached = f"probe `{r.reach.probe}`: " + ", ".join(
                f"{case} {effect}" for case, effect in r.reach.expect.items()
            )
        elif r.reach is not None:
            sets = " ".join(f"--set {s}" for s in r.reach.overrides)
            reached = f"`{r.reach.scenario}` {sets}".strip()
        else:
            reached = f"unreachable: {r.unreachable}"
        up = f"{r.upstream['file']} `{r.upstream['function']}`"
        lines.append(f"| {r.id} | {r.what} | {up} | {' | '.join(cells)} | {project} | {reached} |")
    lines.append("")
    lines.append("Out of scope:")
    lines.extend(f"- {o['what']} ({o['upstream']}): {o['why']}" for o in table.out_of_scope)
    return "\n".join(lines)
