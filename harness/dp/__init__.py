"""DP attention across ranks: the per-step exchange, the decisions the ranks take together,
the rank's serving world around them, and the run over torch.distributed processes.

- ``section``: the scenario section `dp` and its rules across the `serving` section;
- ``record``: the 7-int64 record a rank contributes and what the ranks read back from the
  gathered records;
- ``exchange``: the all-gather itself, over gloo on host tensors or over NCCL on device tensors;
- ``inject``: a sync planted on one rank (the cost every other rank pays for it is the answer);
- ``world``: a rank's step around a serving world (exchange, passes, result processing);
- ``cells``: the scenario's DP cells and each rank's view of them;
- ``timing``: the time pass of a DP cell (no device wait between steps);
- ``job`` / ``launch``: one rank's run and the launch of all ranks (torch's elastic launcher);
- ``fork_server`` / ``lifeline``: what the ranks are forked from, and how they die with the
  launcher;
- ``summary``, ``plots``, ``trace``: what a DP run's summary, figures and trace show;
- ``plugin``: the world's registration (harness.registry).

Modelled after sglang 504570f4 (``managers/scheduler_components/dp_attn.py`` and its callers).
"""
