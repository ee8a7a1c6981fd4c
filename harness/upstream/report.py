"""The side-by-side table of an executed fidelity check, and its one-line verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.fidelity import Table
from harness.upstream.execute import CellResult, Execution
from harness.upstream.sites import named_by_table


def _short(location: str) -> str:
    return location.split("sglang/srt/", 1)[-1]


def _side(outcome) -> str:
    if outcome.exception:
        return outcome.exception
    sites = ", ".join(f"{k} {_short(loc)}" for k, loc, _ in outcome.syncs)
    return f"{len(outcome.syncs)}" + (f": {sites}" if sites else "")


def render(execution: Execution, explained: dict[str, str]) -> str:
    """Markdown: one row per cell (cell, mirror, upstream's syncs and sites, the model's)."""
    head = (
        f"### {execution.label} against `{execution.variant}`\n\n"
        "| cell | upstream | model | agree | values |\n| --- | --- | --- | --- | --- |"
    )
    lines = [head]
    for r in execution.results:
        agree = "yes" if r.agree else ("explained" if r.cell.name in explained else "**no**")
        values = {None: "-", True: "equal", False: "**differ**"}[r.values_agree]
        lines.append(
            f"| {r.cell.name} | {_side(r.upstream)} | {_side(r.model)} | {agree} | {values} |"
        )
    counted = sorted(execution.stand_in_calls.items())
    real = execution.run_for_real
    stood = ", ".join(f"{k} {n}" for k, n in counted if k not in real)
    lines += ["", f"Stand-ins called: {stood}."]
    ran = ", ".join(f"{k} {n}" for k, n in counted if k in real)
    if ran:
        lines.append(f"Run for real (calls): {ran}.")
    return "\n".join(lines)


def render_all(executions: Sequence[Execution], explained: dict[str, dict[str, str]]) -> str:
    return "\n\n".join(render(ex, explained.get(ex.label, {})) for ex in executions)


@dataclass(frozen=True)
class Verdict:
    agreeing: int
    cells: int
    sites_named: int
    sites: int
    unexplained: tuple[str, ...]  # "label: cell" of differing cells no entry explains

    def line(self) -> str:
        return (
            f"upstream executed: {self.agreeing} of {self.cells} cells agree; "
            f"{self.sites_named} of {self.sites} sites in the statement the fidelity table names"
        )


def verdict(
    executions: Sequence[Execution], table: Table, explained: dict[str, dict[str, str]]
) -> Verdict:
    agreeing = cells = named = total = 0
    unexplained: list[str] = []
    for ex in executions:
        mine = explained.get(ex.label, {})
        cells += len(ex.results)
        agreeing += ex.agreeing
        unexplained += [f"{ex.label}: {r.cell.name}" for r in ex.results if _unexplained(r, mine)]
        sites = {(loc, fn, kind) for r in ex.results for kind, loc, fn in r.upstream.syncs}
        total += len(sites)
        named += sum(
            named_by_table(loc, fn, kind, table, ex.variant, exact=ex.lines_apply(loc))
            for loc, fn, kind in sites
        )
    return Verdict(agreeing, cells, named, total, tuple(unexplained))


def _unexplained(r: CellResult, explained: dict[str, str]) -> bool:
    return (not r.agree or r.values_agree is False) and r.cell.name not in explained
