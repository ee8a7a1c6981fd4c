"""Real programs from libraries nobody here wrote, run under the sync ledger.

A ledger is only trusted once it runs other people's code unchanged and counts what the CUDA
driver counts. Each program is a tiny, randomly initialised configuration of a real library
call (transformers' `generate`, torch.amp, torch.optim, torch.distributions, torch.nn.utils,
torchvision's detection, timm), with nothing downloaded (`catalogue.programs()`).
`harness.programs.suite` runs each with and without a ledger: the outputs must be
bit-identical, and the syncs per location must equal the committed expectation
(`expected_syncs.json`). The programs are also a world (``plugin``): a scenario's cells, whose
syncs per step and step times `bench` measures.

The package imports nothing itself: finding the worlds (harness.registry) imports its plugin
where torch may be absent.
"""
