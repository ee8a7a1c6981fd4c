"""A real program as the runner's world: its inputs prepared at set-up, one call of its step
per scheduler step (region `step`, path eager: nothing is captured)."""

from __future__ import annotations

from typing import Any

import torch

from harness.programs.catalogue import programs
from harness.programs.registry import Program, Step
from harness.runner.cells import Cell
from harness.scenario import Scenario
from syncledger import region, tags


class ProgramWorld:
    def __init__(self, program: Program, device: torch.device):
        self.program = program
        self.device = device
        self.findings: list[Any] = []
        self._step: Step | None = None

    def warmup_and_capture(self) -> None:
        """Build the program's model and data on the device (set-up, never measured)."""
        self._step = self.program.prepare(self.device)

    def step(self) -> Any:
        with tags(path="eager"), region("step"):
            return self._step()


def build_program_world(sc: Scenario, cell: Cell, device: torch.device) -> ProgramWorld:
    program = programs()[cell.case]
    missing = program.missing()
    if missing:
        raise ModuleNotFoundError(f"{program.name} needs {', '.join(missing)}")
    if not program.cpu_torch and not torch.version.cuda:
        raise RuntimeError(f"{program.name}: its libraries need a CUDA build of torch")
    return ProgramWorld(program, device)
