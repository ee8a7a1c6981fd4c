"""Adding a variant is two steps (docs/extending.md): declare it with its policy, and describe
its upstream lines in the fidelity table. A fourth variant declared here appears in the
fidelity table, in the summary and in the gate's baseline, and the committed fidelity table,
which does not describe it, is refused rather than left unchecked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from harness.backend.variants import POLICIES, DroppedPolicy, policy
from harness.cli import main
from harness.errors import InputError
from harness.fidelity import TABLE, load_table, render_markdown
from harness.variants import declare, forget
from tests.support.tiny import tiny_scenario

TWIN = "twin"
SCENARIO = tiny_scenario(("before", TWIN), name="twin")


@pytest.fixture
def fourth_variant() -> Iterator[str]:
    declare(TWIN, "a9cf5e68", "dropped again, declared by a test")

    @policy(TWIN)
    @dataclass(frozen=True)
    class Twin(DroppedPolicy):
        pass

    try:
        yield TWIN
    finally:
        forget(TWIN)
        del POLICIES[TWIN]


def test_the_fidelity_table_needs_and_shows_its_column(fourth_variant, tmp_path) -> None:
    with pytest.raises(InputError, match=f"does not describe variant.*{TWIN}"):
        load_table()
    data = yaml.safe_load(TABLE.read_text())
    for row in data["rows"]:
        row["upstream"][TWIN] = row["upstream"]["dropped"]
    described = tmp_path / "table.yaml"
    described.write_text(yaml.safe_dump(data))
    head = render_markdown(load_table(described), {}).splitlines()[0]
    assert f"| {TWIN} (a9cf5e68) |" in head


@pytest.mark.slow
def test_the_summary_and_the_gate_show_it(fourth_variant, tmp_path, capsys) -> None:
    scenario = tmp_path / "twin.yaml"
    scenario.write_text(SCENARIO)
    bench = ["bench", "--scenario", str(scenario), "--device", "emu", "--no-progress"]
    assert main([*bench, "--out", str(tmp_path / "runs")]) == 0
    summary = capsys.readouterr().out
    assert f"{TWIN}" in summary.split("Each variant against before", 1)[1]
    args = ["--baselines", str(tmp_path), "--scenarios", str(scenario), "--no-progress"]
    assert main(["baseline", *args, "--device", "emu"]) == 0
    counted = json.loads((tmp_path / "twin.json").read_text())["counts"]
    assert {c["variant"] for c in counted} == {"before", TWIN}
    assert main(["gate", *args, "--device", "emu"]) == 0
