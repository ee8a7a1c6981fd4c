"""`python -m harness programs`: the real-programs suite, on CUDA or the emulated device.

Each program (transformers' generate, torch.amp, torch.optim, torch.distributions,
torch.nn.utils, torchvision, timm; tiny random configurations, nothing downloaded) runs without
and then with a process-wide ledger. It passes when it runs, its output is bit-identical, its
syncs per site equal `harness/programs/expected_syncs.json`, and on CUDA with CUPTI its syncs
equal the driver's synchronizing calls. Exit 0 when all pass, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse

from harness.commands import command
from harness.errors import CheckFailed, InputError


def _configure(p: argparse.ArgumentParser) -> None:
    from syncledger import DEVICE_KINDS

    p.add_argument("--device", choices=DEVICE_KINDS, default="auto")
    p.add_argument("names", nargs="*", help="programs to run (default: all that load here)")
    p.add_argument(
        "--record",
        action="store_true",
        help="write the syncs per site seen now as the expectation (review the diff)",
    )
    p.add_argument("--list", action="store_true", help="list the programs and exit")


@command(
    "programs",
    help="run the real-programs suite: output unchanged under the ledger, syncs as expected",
    configure=_configure,
)
def run(args: argparse.Namespace) -> int:
    from harness.programs import suite
    from harness.programs.catalogue import programs
    from syncledger.device import resolve_kind

    known = programs()
    if args.list:
        for p in known.values():
            where = "" if p.cpu_torch else " (needs a CUDA build of torch)"
            print(f"{p.name:<28}{p.library:<20}{p.what}{where}")
        return 0
    try:
        kind = resolve_kind(args.device)
    except ValueError as exc:
        raise InputError(str(exc), key="--device") from None
    unknown = sorted(set(args.names) - set(known))
    if unknown:
        raise InputError(f"unknown program {unknown[0]!r}; see --list", key="names")
    chosen = [p for p in suite.runnable(kind) if not args.names or p.name in args.names]
    expected = suite.load_expected()
    verdicts = []
    for p in chosen:
        outcome = suite.run_program(p, kind)
        verdicts.append(suite.judge(outcome, expected))
        print(f"{p.name}: {'ok' if verdicts[-1].ok else 'FAILED'}", flush=True)
    print(suite.format_table(verdicts))
    if args.record:
        suite.record([v.outcome for v in verdicts], suite.measured_on(kind))
        print(f"recorded: {suite.EXPECTED}")
        return 0
    failed = [v.outcome.program for v in verdicts if not v.ok]
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(verdicts)} programs: {', '.join(failed)}")
    return 0
