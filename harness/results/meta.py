"""meta.json: what a run was, where, and how to reproduce it."""

from __future__ import annotations

import copy
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

from harness.results.files import write_atomic
from harness.results.tables import FORMAT_VERSION, RESULT_FORMAT

REPO_ROOT = Path(__file__).resolve().parents[2]


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_info() -> dict[str, Any]:
    """Commit and whether the tree had uncommitted changes (read-only git queries)."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": bool(status) if status is not None else None}


def machine_info() -> dict[str, Any]:
    """pytest-benchmark's machine_info (same keys), minus the long CPU flag list."""
    return copy.deepcopy(_machine_info())


@cache
def _machine_info() -> dict[str, Any]:
    # the same for the whole process, and slow to ask (py-cpuinfo starts an interpreter)
    try:
        from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info

        info = pytest_benchmark_generate_machine_info()
        info.get("cpu", {}).pop("flags", None)
    except Exception:  # optional: fall back to the standard library
        info = {
            "node": platform.node(),
            "machine": platform.machine(),
            "system": platform.system(),
            "release": platform.release(),
            "python_version": platform.python_version(),
            "cpu": {"count": os.cpu_count()},
        }
    return info


def nvidia_driver() -> str | None:
    """The NVIDIA driver version from nvidia-smi, or None where there is none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None


def device_info(device_kind: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "device_kind": device_kind,
        "gpu_name": None,
        "gpu_driver": None,
        "cuda_runtime": torch.version.cuda,
    }
    if device_kind == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        info.update(
            gpu_name=props.name,
            gpu_driver=nvidia_driver(),
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            gpu_sm_count=props.multi_processor_count,
        )
    return info


def versions() -> dict[str, Any]:
    import torch

    # from the package metadata: importing triton here could precede TRITON_INTERPRET's set-up
    try:
        triton_version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton_version = None
    import harness

    return {
        "torch_version": torch.__version__,
        "triton_version": triton_version,
        "python_version": platform.python_version(),
        "harness_version": harness.__version__,
    }


def reproduce_command(argv: list[str] | None = None) -> str:
    """The command line that reruns this run (`python -m harness ...`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", "-m", "harness", *argv])


def base_meta(
    *, argv: list[str] | None, device_kind: str, scenario: dict[str, Any], run_id: str
) -> dict[str, Any]:
    return {
        "result_format": RESULT_FORMAT,
        "result_format_version": FORMAT_VERSION,
        "status": "incomplete",
        "complete": False,
        "run_id": run_id,
        "command": reproduce_command(argv),
        "start_time": utc_now(),
        "end_time": None,
        **git_info(),
        **device_info(device_kind),
        **versions(),
        **scenario,
        "machine_info": machine_info(),
    }


def write_check_meta(folder: Path, check: str, device_kind: str, **extra: Any) -> None:
    """meta.json of one `python -m harness.checks.<check>` run: its command, when, the device,
    the versions and the checkout, then `extra`."""
    meta = {
        "check": check,
        "command": " ".join([sys.executable, "-m", f"harness.checks.{check}", *sys.argv[1:]]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **device_info(device_kind),
        **versions(),
        **git_info(),
        **extra,
    }
    write_atomic(folder / "meta.json", json.dumps(meta, indent=2, default=str) + "\n")
