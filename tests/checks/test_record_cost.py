"""The per-call cost benchmark: its rows, what an arm adds (paired by round) and its targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.checks import record_cost
from harness.cli import main


def _row(device: str, probe: str, arm: str, rnd: int, value: float) -> dict[str, object]:
    return {"device": device, "probe": probe, "arm": arm, "round": rnd, "value": value}


def test_an_arm_adds_its_time_less_the_plain_time_of_the_same_round() -> None:
    rows = [
        _row("emu", "item", "plain", 0, 5000.0),
        _row("emu", "item", "ledger", 0, 7000.0),
        _row("emu", "item", "plain", 1, 9000.0),  # a slow round: both arms slow
        _row("emu", "item", "ledger", 1, 11500.0),
        _row("emu", "item", "plain", 2, 5000.0),
        _row("emu", "item", "ledger", 2, 7500.0),
    ]
    assert record_cost.added_ns(rows, "emu", "item", "ledger") == [2000.0, 2500.0, 2500.0]
    [(target, value, met)] = [v for v in record_cost.target_verdicts(rows) if v[1] is not None]
    assert (target.device, value, met) == ("emu", 2500.0, True)
    slower = [{**r, "value": r["value"] + 3000.0} if r["arm"] == "ledger" else r for r in rows]
    [(_t, value, met)] = [v for v in record_cost.target_verdicts(slower) if v[1] is not None]
    assert (value, met) == (5500.0, False)
    assert "MISSED" in record_cost.verdict_lines(slower)[0]


def test_emulated_run_writes_a_row_per_probe_arm_and_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cost"
    main(
        [
            "check",
            "record-cost",
            "--out",
            str(out),
            "--device",
            "emu",
            "--calls",
            "5",
            "--rounds",
            "2",
        ]
    )
    lines = (out / "record_cost.csv").read_text().splitlines()
    assert len(lines) == 1 + len(record_cost.PROBES) * 2 * 2
    assert lines[0].split(",")[:6] == ["device", "probe", "arm", "round", "value", "unit"]
    assert (out / "meta.json").exists()
    text = capsys.readouterr().out
    assert "emu  item" in text and "item under ledger on emu" in text
