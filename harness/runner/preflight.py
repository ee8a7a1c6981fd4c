"""Before any pass runs: can the scenario run at all, and on this machine?

A scenario can pass the schema and still be unable to run: a rule across keys that only its
world knows (a context too short for the prompts), or more memory than the machine has free
(the time pass holds every cell's world at once), or more rank processes than cores. Each is
refused here with one line naming the keys (InputError, exit 2), before a run folder exists,
instead of every cell failing or the machine swapping minutes later.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from harness.errors import InputError
from harness.runner.cells import Cell, Footprint, runner_part
from harness.scenario import Scenario

# A process with torch and the harness imported (a DP rank before its worlds): 343 MiB RSS
# measured with torch's CPU build.
PROCESS_BYTES = 350 << 20
# Share of the free memory a run may plan to use: the estimate counts the request pools only.
USABLE = 0.8
GIB = float(1 << 30)


def cell_footprints(sc: Scenario, file: str, only: list[Cell] | None = None) -> list[Footprint]:
    """Every cell's footprint (`only`: these cells'), after the world's own checks of the cell
    (InputError)."""
    part = runner_part(sc)
    out = []
    for cell in part.cells(sc) if only is None else only:
        problem = part.check(sc, cell)
        if problem is not None:
            raise InputError(problem.message, file=file, key=", ".join(problem.keys))
        fp = part.footprint(sc, cell)
        if fp is not None:
            out.append(fp)
    return out


def combined(footprints: Sequence[Footprint], at_once: bool) -> Footprint:
    """Several worlds alive together (summed) or one after another (the largest)."""
    if not footprints:
        return Footprint(0, 0, ())
    pick = sum if at_once else max
    keys = tuple(dict.fromkeys(k for fp in footprints for k in fp.keys))
    return Footprint(
        pick(fp.host_bytes for fp in footprints),
        pick(fp.device_bytes for fp in footprints),
        keys,
    )


def free_host_bytes() -> int | None:
    """Memory the machine can give without swapping (Linux MemAvailable), None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def free_gpu_bytes() -> int:
    """Free memory of the current GPU (each rank has one of its own)."""
    import torch

    return torch.cuda.mem_get_info()[0]


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_memory(
    host_bytes: int, device_bytes: int, keys: Sequence[str], device_kind: str, file: str, what: str
) -> None:
    """Refuse a run that needs more memory than is free: `device_bytes` is what each GPU holds
    (on the emulated device, host memory too)."""
    if device_kind == "cuda":
        budgets = [("host", host_bytes, free_host_bytes()), ("GPU", device_bytes, free_gpu_bytes())]
    else:
        budgets = [("host", host_bytes + device_bytes, free_host_bytes())]
    for where, needed, free in budgets:
        if free is not None and needed > USABLE * free:
            raise InputError(
                f"{what} need at least {needed / GIB:.1f} GiB of {where} memory (their request "
                f"pools), and {free / GIB:.1f} GiB is free here",
                file=file,
                key=", ".join(keys),
            )


def check_single_rank(sc: Scenario, which: str, device_kind: str, file: str) -> None:
    """A single-rank run: the count pass builds one cell's world after another; the time pass
    builds every cell's world before it times any."""
    footprints = cell_footprints(sc, file)
    at_once = which in ("time", "both") and len(footprints) > 1
    need = combined(footprints, at_once)
    what = (
        f"the {len(footprints)} cells' worlds, alive together in the time pass,"
        if at_once
        else "a cell's world"
    )
    check_memory(need.host_bytes, need.device_bytes, need.keys, device_kind, file, what)
