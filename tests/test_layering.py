"""The house's dependency rules, read from the import graph of harness/, kernels/ and the
sync ledger's package (syncledger/src/syncledger).

Every import counts: at the top of a module, inside a function (a lazy one), or for type
checking only. A package is `kernels`, `syncledger`, a sub-package `harness.<name>`, or a
module directly under harness/ (`harness.errors`, `harness.registry`, `harness.cli`). A world is a package
with a `plugin.py` (harness.registry). The rules:

- kernels imports nothing from harness;
- the sync ledger is a library any PyTorch project installs: it imports nothing of the
  benchmark (harness, kernels);
- the backend imports only the batch, the declared variants (harness.variants), the kernels
  and the ledger's region marking;
- matplotlib is imported by the report and the worlds' figures only (nothing below the
  report draws);
- the scenario, runner, results, report and gate layers, and the registry, import no world;
- no cycle between packages.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "harness"
LEDGER_SRC = REPO / "syncledger" / "src"
LAYERS = (
    "harness.scenario",
    "harness.runner",
    "harness.results",
    "harness.report",
    "harness.gate",
    "harness.registry",
)
WORLDS = tuple(sorted(f"harness.{p.parent.name}" for p in HARNESS.glob("*/plugin.py")))
BACKEND_MAY_USE = {
    "harness.batch",
    "harness.variants",
    "kernels",
}  # packages, and the ledger's region marking:
REGION_MARKING = ("syncledger.regions", "syncledger:region")


@dataclass(frozen=True)
class Import:
    where: str  # file:line
    source: str  # the importing package
    target: str  # the imported package (or an outside distribution: torch, matplotlib)
    module: str  # the imported module, dotted
    name: str | None  # the name taken from it (from-imports)


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "harness":
        return parts[0]
    return ".".join(parts[:2]) if len(parts) > 1 else "harness"


def _module_of(path: Path) -> str:
    rel = path.relative_to(LEDGER_SRC if path.is_relative_to(LEDGER_SRC) else REPO)
    rel = rel.with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[Import]:
    """Every import in the file, wherever it stands."""
    module = _module_of(path)
    source = package_of(module)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    rel = path.relative_to(REPO)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        where = f"{rel}:{node.lineno}"
        if isinstance(node, ast.Import):
            out += [Import(where, source, package_of(a.name), a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the importing module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            out += [Import(where, source, package_of(target), target, a.name) for a in node.names]
    return out


@cache  # read once per process, by the first test that asks (not at collection)
def house_imports() -> tuple[Import, ...]:
    roots = (HARNESS, REPO / "kernels", LEDGER_SRC / "syncledger")
    files = sorted(f for root in roots for f in root.rglob("*.py"))
    return tuple(imp for f in files for imp in imports_of(f))


def _ours(pkg: str) -> bool:
    return pkg in ("kernels", "syncledger") or pkg.startswith("harness")


def cycles(imports: Sequence[Import]) -> list[list[str]]:
    """The package cycles (strongly connected components of more than one package)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        if _ours(imp.target) and imp.target != imp.source:
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def wrong_way(imports: Sequence[Import]) -> list[str]:
    """Every import against a rule other than the cycles', as `file:line: what`."""
    bad = []
    for imp in imports:
        src, dst = imp.source, imp.target
        rule = None
        if src == "kernels" and dst.startswith("harness"):
            rule = "kernels imports nothing from harness"
        elif src == "syncledger" and _ours(dst) and dst != src:
            rule = "the ledger imports nothing of the benchmark"
        elif src == "harness.backend" and _ours(dst) and dst != src:
            marking = imp.module in REGION_MARKING or f"{imp.module}:{imp.name}" in REGION_MARKING
            if dst not in BACKEND_MAY_USE and not marking:
                rule = "the backend imports only batch, variants, kernels and region marking"
        if dst == "matplotlib" and src != "harness.report" and src not in WORLDS:
            rule = "only the report and the worlds' figures import matplotlib"
        if src in LAYERS and dst in WORLDS:
            rule = "the scenario, runner, results, report and gate layers import no world"
        if rule:
            bad.append(f"{imp.where}: {src} -> {imp.module}{f'.{imp.name}' if imp.name else ''}"
                       f" ({rule})")  # fmt: skip
    return bad


def test_the_worlds_are_the_packages_with_a_plugin() -> None:
    assert set(WORLDS) >= {"harness.serving", "harness.synccost", "harness.dp", "harness.programs"}


def test_no_import_goes_the_wrong_way() -> None:
    assert wrong_way(house_imports()) == []


def test_no_cycle_between_packages() -> None:
    assert cycles(house_imports()) == []


def _planted(source_file: str, module: str, name: str | None = None) -> list[Import]:
    """The house's imports with one more, as if `source_file` had it."""
    source = package_of(_module_of(REPO / source_file))
    return [*house_imports(), Import(f"{source_file}:1", source, package_of(module), module, name)]


def test_a_planted_wrong_way_import_fails_the_rules() -> None:
    # the results reading the report back: a cycle (the report reads the results)
    assert cycles(_planted("harness/results/summary.py", "harness.report.tables")) == [
        ["harness.report", "harness.results"]
    ]
    # a layer that names a world
    (bad,) = wrong_way(_planted("harness/runner/cells.py", "harness.synccost.world"))
    assert bad.startswith("harness/runner/cells.py:1: harness.runner -> harness.synccost.world")
    # the ledger reaching into the serving world, the backend into the ledger's counting
    assert wrong_way(_planted("syncledger/src/syncledger/ledger.py", "harness.serving.world"))
    assert wrong_way(_planted("syncledger/src/syncledger/outputs.py", "harness.errors"))
    assert wrong_way(_planted("syncledger/src/syncledger/ledger.py", "kernels.api"))
    assert wrong_way(_planted("harness/backend/backend.py", "syncledger", "SyncLedger"))
    assert not wrong_way(_planted("harness/backend/backend.py", "syncledger", "region"))
    # drawing below the report, and kernels using the harness
    assert wrong_way(_planted("harness/results/stats.py", "matplotlib.pyplot"))
    assert wrong_way(_planted("kernels/api.py", "harness.errors"))
