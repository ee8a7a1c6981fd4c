"""The count pass counts syncs only: a non-blocking hazard stays in syncs.csv with its kind;
every row of syncs.csv names the thread, process and detector of its event."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from harness.results.tables import COLUMNS
from harness.runner.cells import Cell
from harness.runner.count_pass import PassRows, run_cell_count
from harness.runner.device import open_device
from harness.scenario import load_scenario
from syncledger import region
from syncledger.events import DETECTORS
from tests.support.runner_fakes import FakeWorld


class StagedCopyWorld(FakeWorld):
    """Every step also copies a small pageable host buffer to the device, non_blocking."""

    def step(self) -> int:
        with region("step"), region("staged_copy"):
            self.seq_lens.copy_(torch.full_like(self.seq_lens, 7, device="cpu"), non_blocking=True)
        return super().step()


SCENARIO = load_scenario("nonspec", ["serving.batch_sizes=[4]", "serving.variants=[after]"])


@pytest.fixture(scope="module")
def rows() -> PassRows:
    """One cell's count pass, read by every test here."""
    with open_device("emu") as dh:
        return run_cell_count(
            SCENARIO.scenario,
            Cell(variant="after", mirror="auto", batch_size=4),
            dh.device,
            lambda s, c, d: StagedCopyWorld(s, c, d),
        )


def test_hazards_are_rows_of_syncs_csv_but_not_counted(rows: PassRows) -> None:
    sc = SCENARIO.scenario
    counts = [dict(zip(COLUMNS["counts"], r)) for r in rows.counts]
    syncs = [dict(zip(COLUMNS["syncs"], r)) for r in rows.syncs]
    staged = [r for r in syncs if r["region"] == "step/staged_copy"]
    assert len(staged) == sc.steps.warmup + sc.steps.count
    assert {r["kind"] for r in staged} == {"pageable_staged"}
    assert {r["syncs"] for r in counts if r["region"] == "step/staged_copy"} == {0}


def test_every_sync_row_names_its_thread_process_and_detector(rows: PassRows) -> None:
    syncs = [dict(zip(COLUMNS["syncs"], r)) for r in rows.syncs]
    assert syncs
    assert {(r["thread"], r["pid"]) for r in syncs} == {
        (threading.current_thread().name, os.getpid())
    }
    detectors = {r["detector"] for r in syncs}
    assert detectors and detectors <= set(DETECTORS), detectors
