"""The real-programs cost benchmark: plain and ledger calls interleaved after a warm-up, and a
ledger call whose syncs differ from the CUDA driver's is reported."""

from __future__ import annotations

import torch

from harness.checks import programs_cost
from harness.programs.registry import Program


def _reads_twice(device: torch.device) -> object:
    x = torch.arange(4, device=device)

    def step() -> int:
        return int(x.sum()) + int(x.max())

    return step


READS_AT = _reads_twice.__code__.co_firstlineno + 4  # the line of step's return


def test_calls_alternate_after_the_suites_first_call_and_count_the_ledgers_syncs() -> None:
    program = Program("reads_twice", "torch", "two reads", _reads_twice)
    rows = programs_cost.program_rows(program, "emu", calls=2, expected={})
    assert [(r["arm"], r["call"]) for r in rows] == [
        ("first", 0),
        ("plain", 0),
        ("ledger", 0),
        ("plain", 1),
        ("ledger", 1),
    ]
    assert [r.get("syncs") for r in rows] == [2, None, 2, None, 2]
    assert rows[0]["as_expected"] is None  # no expectation recorded for it
    assert programs_cost.ratio(rows, "reads_twice") is not None
    assert programs_cost.disagreements(rows) == []
    assert programs_cost.summary(rows)[1].startswith("reads_twice")


def test_the_first_call_is_held_against_the_expectation() -> None:
    program = Program("reads_twice", "torch", "two reads", _reads_twice)
    site = f"tests/checks/test_programs_cost.py:{READS_AT} d2h_read"  # both reads
    rows = programs_cost.program_rows(
        program, "emu", calls=1, expected={"reads_twice": {"syncs": {site: 2}}}
    )
    assert rows[0]["as_expected"] is True
    rows = programs_cost.program_rows(
        program, "emu", calls=1, expected={"reads_twice": {"syncs": {site: 1}}}
    )
    assert programs_cost.disagreements(rows) == [
        "reads_twice: syncs per site differ from the expectation"
    ]


def test_a_failing_program_and_a_count_off_the_drivers_are_reported() -> None:
    def broken(device: torch.device) -> object:
        raise RuntimeError("no such model")

    program = Program("broken", "torch", "", broken)
    rows = programs_cost.program_rows(program, "emu", calls=1, expected={})
    rows.append(
        {"program": "p", "arm": "ledger", "call": 0, "value": 1.0, "syncs": 3, "driver_calls": 4}
    )
    assert programs_cost.disagreements(rows) == [
        "broken: RuntimeError: no such model",
        "p ledger call 0: ledger 3 syncs, driver 4",
    ]
