"""Running a program twice, without and with a process-wide ledger, and judging the two runs.

Verdicts per program: it ran without raising both times; its outputs are bit-identical (every
tensor's bytes, dtype and shape; every Python value); its syncs per site (the statement and
the kind) equal the committed expectation; and on CUDA, its syncs equal the CUDA driver's
synchronizing calls as CUPTI counted them during the same run.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch

from harness.programs.catalogue import programs
from harness.programs.registry import Program
from harness.results.files import write_atomic
from syncledger import SyncLedger, cupti, emulated_device, host_values

EXPECTED = Path(__file__).with_name("expected_syncs.json")
CUDA = torch.device("cuda")
_SITE_PACKAGES = re.compile(r".*[/\\](?:site|dist)-packages[/\\]")
_REPO = str(Path(__file__).resolve().parents[2]) + "/"


@cache
def _statement_starts(path: str) -> dict[int, int]:
    """Each line of a Python file -> the first line of the innermost statement holding it."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    starts: dict[int, int] = {}
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    for n in sorted(statements, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, reverse=True):
        for line in range(n.lineno, (n.end_lineno or n.lineno) + 1):
            starts[line] = n.lineno
    return starts


def portable_location(location: str) -> str:
    """`file:line` the same on every machine and Python: the line is the first of its statement
    (3.11 and 3.12 name different lines of a statement that spans several), a library's path
    runs from its package on, a path of this repository from its root."""
    path, _, line = location.rpartition(":")
    if line.isdigit():
        location = f"{path}:{_statement_starts(path).get(int(line), int(line))}"
    location = _SITE_PACKAGES.sub("", location)
    return location[len(_REPO) :] if location.startswith(_REPO) else location


def site_key(location: str, kind: str) -> str:
    """A sync's site as the suite compares it across devices: its statement and its kind. The op
    is left out: on CUDA a sync only the driver saw has none to name."""
    return f"{portable_location(location)} {kind}"


def site(event: Any) -> str:
    return site_key(event.location, event.kind.value)


@dataclass
class Outcome:
    program: str
    device: str  # "cuda" or "emu"
    error: str | None = None  # the first run's or the second's exception, with its place
    identical: bool | None = None  # outputs bit-identical with and without the ledger
    syncs: Counter[str] = field(default_factory=Counter)  # site -> syncs
    hazards: int = 0
    detectors: tuple[str, ...] = ()
    driver_calls: int | None = None  # CUPTI: synchronizing driver calls during the ledger run
    plain_s: float = 0.0
    ledger_s: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.syncs.values())


def _flatten(x: Any) -> Iterator[Any]:
    if isinstance(x, dict):
        for k in sorted(x, key=str):
            yield k
            yield from _flatten(x[k])
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _flatten(v)
    elif hasattr(x, "to_tuple") and not isinstance(x, torch.Tensor):  # transformers outputs
        yield from _flatten(x.to_tuple())
    else:
        yield x


def _host(x: Any) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    t = host_values(x).detach()
    return t.cpu() if t.device.type != "cpu" else t


def _bytes_equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            return False
        return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
    return type(a) is type(b) and a == b


def identical(first: Any, second: Any) -> bool:
    """Bit-identical outputs (NaN equal to itself, -0.0 apart from 0.0)."""
    a, b = [_host(v) for v in _flatten(first)], [_host(v) for v in _flatten(second)]
    return len(a) == len(b) and all(map(_bytes_equal, a, b))


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" at {portable_location(f'{frames[-1].filename}:{frames[-1].lineno}')}" if frames else ""
    return f"{type(exc).__name__}: {exc}{at}"


@contextmanager
def on_device(kind: str) -> Iterator[None]:
    """Run a program's prepare and step on `kind`: "emu" opens the emulated device (code that
    says "cuda" runs there); "cuda" is the GPU as it is."""
    if kind == "emu":
        with emulated_device():
            yield
    else:
        yield


def run_program(program: Program, kind: str) -> Outcome:
    """Run `program` on `kind` ("cuda" or "emu") without, then with, a process-wide ledger."""
    out = Outcome(program.name, kind)
    with on_device(kind):
        try:
            step = program.prepare(CUDA)
            t0 = time.perf_counter()
            plain = step()
            if kind == "cuda":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            step = program.prepare(CUDA)
            calls0 = cupti.driver_calls()
            with SyncLedger(scope="process") as led:
                traced = step()
            t2 = time.perf_counter()
            calls = cupti.driver_calls() - calls0
        except Exception as exc:
            out.error = _where(exc)
            return out
        out.plain_s, out.ledger_s = t1 - t0, t2 - t1
        out.identical = identical(plain, traced)
    out.syncs = Counter(site(e) for e in led.events if e.is_sync)
    out.hazards = sum(1 for e in led.events if not e.is_sync)
    out.detectors = led.detectors
    out.driver_calls = calls if "cupti" in led.detectors else None
    return out


def runnable(kind: str) -> list[Program]:
    """The programs whose libraries load here (on the emulated device: with a CPU-only torch)."""
    cpu_only = not torch.version.cuda
    return [
        p
        for p in programs().values()
        if not p.missing() and (kind == "cuda" or p.cpu_torch or not cpu_only)
    ]


def load_expected(path: Path = EXPECTED) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def expected_syncs(expected: dict[str, dict[str, Any]], name: str) -> Counter[str] | None:
    entry = expected.get(name)
    return None if entry is None else Counter(entry["syncs"])


def record(outcomes: list[Outcome], measured_on: str, path: Path = EXPECTED) -> None:
    """Write the outcomes' syncs per site as the expectation (keeping other programs')."""
    doc = load_expected(path)
    for o in outcomes:
        if o.error is None:
            doc[o.program] = {"measured_on": measured_on, "syncs": dict(sorted(o.syncs.items()))}
    write_atomic(path, json.dumps(dict(sorted(doc.items())), indent=2) + "\n")


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    problems: tuple[str, ...]  # empty: the program passed every check

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(outcome: Outcome, expected: dict[str, dict[str, Any]]) -> Verdict:
    """Every check one program's two runs must pass (see the module's docstring)."""
    if outcome.error is not None:
        return Verdict(outcome, (f"failed: {outcome.error}",))
    problems = []
    if not outcome.identical:
        problems.append("output changed under the ledger")
    want = expected_syncs(expected, outcome.program)
    if want is None:
        problems.append("no expected syncs recorded (run `python -m harness programs --record`)")
    elif want != outcome.syncs:
        more, fewer = outcome.syncs - want, want - outcome.syncs
        diff = [f"+{n} {s}" for s, n in sorted(more.items())]
        diff += [f"-{n} {s}" for s, n in sorted(fewer.items())]
        problems.append("syncs per site differ from the expectation: " + "; ".join(diff))
    if outcome.driver_calls is not None and outcome.driver_calls != outcome.total:
        problems.append(
            f"ledger {outcome.total} syncs, CUDA driver {outcome.driver_calls} synchronizing calls"
        )
    return Verdict(outcome, tuple(problems))


def format_table(verdicts: list[Verdict]) -> str:
    """One row per program: the plain run, the ledger's syncs, CUPTI's count, the verdict."""
    head = (
        f"{'program':<28}{'library':<20}{'plain':>7}{'ledger':>8}{'driver':>8}  detectors / verdict"
    )
    lines = [head]
    for v in verdicts:
        o = v.outcome
        plain = "fails" if o.error else "ok"
        syncs = "-" if o.error else str(o.total)
        driver = "-" if o.driver_calls is None else str(o.driver_calls)
        verdict = "ok" if v.ok else "; ".join(v.problems)
        library = programs()[o.program].library
        detectors = ",".join(o.detectors) or "-"
        lines.append(
            f"{o.program:<28}{library:<20}{plain:>7}{syncs:>8}{driver:>8}  {detectors}: {verdict}"
        )
    return "\n".join(lines)


def measured_on(kind: str) -> str:
    """Where a recording was made: the device and the versions that decide the counts."""
    where = torch.cuda.get_device_name() if kind == "cuda" else "the emulated device"
    libs = []
    for name in ("torch", "transformers", "torchvision", "timm"):
        try:
            libs.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{where}; {', '.join(libs)}"
