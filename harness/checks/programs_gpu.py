"""`python -m harness check programs --out DIR`: the real-programs suite on a GPU.

Each program that loads here runs on CUDA (without and with a process-wide ledger, CUPTI
attached) and on the emulated device. Per program: the plain run, the ledger's syncs (by
detector), the CUDA driver's synchronizing calls during the ledger run (CUPTI), the emulated
device's syncs, whether the output stayed bit-identical, and whether the syncs per site equal the
committed expectation. Exit 0 when every program passes on both, 1 otherwise, 2 without CUDA.
`--record` rewrites harness/programs/expected_syncs.json from the CUDA runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.checks.registry import check
from harness.programs import suite
from harness.results.files import result_files, write_dict_rows
from harness.results.meta import write_check_meta
from syncledger import cupti


def _row(cuda: suite.Verdict, emu: suite.Verdict | None) -> dict[str, object]:
    o = cuda.outcome
    return {
        "program": o.program,
        "plain": "fails" if o.error else "ok",
        "ledger_syncs": o.total,
        "cupti_driver_calls": o.driver_calls,
        "emulated_syncs": None if emu is None else emu.outcome.total,
        "identical": o.identical,
        "detectors": ",".join(o.detectors),
        "cuda_ok": cuda.ok,
        "emulated_ok": None if emu is None else emu.ok,
        "problems": " | ".join(cuda.problems + (emu.problems if emu else ())),
    }


def _configure(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--record", action="store_true")


@check(
    "programs",
    "the real programs on CUDA: the ledger against CUPTI and the expectation; --record rewrites it",
    configure=_configure,
    in_all=True,
    needs_cuda=True,
)
def run_check(args: argparse.Namespace) -> int:
    files = result_files(args.out, ("programs.csv", "meta.json"))
    cupti.attach()
    expected = suite.load_expected()
    rows, cuda_outcomes, ok = [], [], True
    for program in suite.runnable("cuda"):
        cuda = suite.judge(suite.run_program(program, "cuda"), expected)
        emu = (
            suite.judge(suite.run_program(program, "emu"), expected) if program.cpu_torch else None
        )
        cuda_outcomes.append(cuda.outcome)
        ok = ok and cuda.ok and (emu is None or emu.ok)
        rows.append(_row(cuda, emu))
        print(f"{program.name}: cuda {'ok' if cuda.ok else 'FAILED'}", flush=True)
    write_dict_rows(files["programs.csv"], rows)
    write_check_meta(args.out, "programs_gpu", "cuda", cupti=cupti.status())
    for r in rows:
        print(
            f"{r['program']:<28}{r['plain']:>6}{r['ledger_syncs']!s:>7}{r['cupti_driver_calls']!s:>7}"
            f"{r['emulated_syncs']!s:>7}  {r['problems'] or 'ok'}"
        )
    if args.record:
        suite.record(cuda_outcomes, suite.measured_on("cuda"))
        return 0
    return 0 if ok else 1
