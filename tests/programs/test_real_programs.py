"""The real-programs suite on the emulated device: every program whose libraries load beside a
CPU-only PyTorch runs unchanged under the ledger with the expected syncs per site; and the suite
itself catches a changed output and a planted sync."""

from __future__ import annotations

import pytest
import torch

from harness.programs.catalogue import programs
from harness.programs.registry import Program
from harness.programs.suite import judge, load_expected, run_program, runnable, site_key
from syncledger.state import watching

PROGRAMS = programs()
EXPECTED = load_expected()
CPU_PROGRAMS = [p.name for p in runnable("emu")]


def test_the_suite_has_ten_programs_and_all_that_load_here_run() -> None:
    assert len(PROGRAMS) >= 10
    cpu_capable = [p.name for p in PROGRAMS.values() if p.cpu_torch]
    runs_here = [name for name in CPU_PROGRAMS if PROGRAMS[name].cpu_torch]
    assert runs_here == cpu_capable, "a CPU program's library is missing"
    if not torch.version.cuda:  # the others cannot load beside a CPU-only torch
        assert cpu_capable == CPU_PROGRAMS
    assert len({p.library for p in PROGRAMS.values()}) >= 6


@pytest.mark.parametrize("name", CPU_PROGRAMS)
def test_program_runs_unchanged_with_the_expected_syncs(name: str) -> None:
    verdict = judge(run_program(PROGRAMS[name], "emu"), EXPECTED)
    assert verdict.ok, "; ".join(verdict.problems)


def _variant(name: str, step_with: object) -> Program:
    base = PROGRAMS["embedding_lm_train"]
    return Program(name, base.library, base.what, step_with)  # type: ignore[arg-type]


def test_a_planted_sync_is_named_with_its_site() -> None:
    base = PROGRAMS["embedding_lm_train"]

    def planted(device: torch.device):  # type: ignore[no-untyped-def]
        step = base.prepare(device)

        def with_read() -> object:
            out = step()
            torch.ones(1, device=device).item()  # the planted sync
            return out

        return with_read

    outcome = run_program(_variant("embedding_lm_train", planted), "emu")
    [problem] = judge(outcome, EXPECTED).problems
    assert "+1 tests/programs/test_real_programs.py:" in problem and problem.endswith(" d2h_read")


def test_an_output_that_changes_under_the_ledger_is_caught() -> None:
    def two_faced(device: torch.device):  # type: ignore[no-untyped-def]
        return lambda: torch.tensor([1.0 if watching() else 0.0])

    verdict = judge(run_program(_variant("embedding_lm_train", two_faced), "emu"), EXPECTED)
    assert "output changed under the ledger" in verdict.problems


def test_a_site_is_its_statement_whatever_line_python_names(tmp_path) -> None:
    # Python 3.11 names a multi-line statement's first line, 3.12 the line of the expression
    # that synced: the suite compares devices (and Pythons) by the statement
    src = tmp_path / "lib.py"
    src.write_text("x = 1\nif x and (\n    x > 0\n):\n    y = [\n        x,\n    ]\n")
    assert [site_key(f"{src}:{n}", "d2h_read") for n in (2, 3, 4, 6)] == [
        f"{src}:2 d2h_read",
        f"{src}:2 d2h_read",
        f"{src}:2 d2h_read",
        f"{src}:5 d2h_read",
    ]
    assert site_key(f"{tmp_path}/missing.py:7", "explicit") == f"{tmp_path}/missing.py:7 explicit"
