"""Real programs from libraries nobody here wrote, run under the sync ledger.

A ledger is only trusted once it runs other people's code unchanged and counts what the CUDA
driver counts. Each program is a tiny, randomly initialised configuration of a real library
call (transformers' `generate`, torch.amp, torch.optim, torch.distributions, torch.nn.utils,
torchvision's detection, timm), with nothing downloaded. `harness.programs.suite` runs each
with and without a ledger: the outputs must be bit-identical, and the syncs per location must
equal the committed expectation (`expected_syncs.json`).
"""

from harness.programs.registry import PROGRAMS, Program, program

__all__ = ["PROGRAMS", "Program", "program"]

# the program modules register on import
from harness.programs import hf, training, vision  # noqa: F401
