"""`python -m harness baseline`: rewrite results/baselines/<scenario>.json deliberately."""

from __future__ import annotations

import argparse

from harness.commands import command
from harness.commands.gate import check_count_passes, configure_common, scenario_inputs


@command(
    "baseline",
    help="rerun the count pass and rewrite the gate's baselines (review the diff, then commit)",
    configure=configure_common,
)
def run(args: argparse.Namespace) -> int:
    from harness.gate.baseline import baseline_path
    from harness.gate.run import chosen_scenarios, write_baselines
    from harness.runner.device import open_device

    loaded = chosen_scenarios(args.scenarios)
    with open_device(args.device) as dh:
        check_count_passes(loaded, dh.kind)
        plan = scenario_inputs(loaded)  # before the count passes, not after
        for ls in loaded:
            plan.write(baseline_path(args.baselines, ls.name), "--baselines")
        write_baselines(
            loaded, args.baselines, dh, show_progress=False if args.no_progress else None
        )
    return 0
