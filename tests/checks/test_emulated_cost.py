"""`python -m harness check emulated-cost`: the emulated device's step against plain CPU tensors
and against the floor of any wrapper-subclass emulation, every sample kept."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from harness.checks import emulated_cost
from harness.checks.emulated_cost import (
    FloorDispatchMode,
    FloorMode,
    FloorTensor,
    PassThroughDispatchMode,
)
from harness.cli import main

T = torch.arange(-4, 12, dtype=torch.int32)
IDX = torch.randperm(16)
WANT = torch.where(T[IDX] > 3, T[IDX] // 2, -1).clamp(min=0)


def test_the_floor_runs_the_cpu_kernels_on_real_values() -> None:
    with FloorMode():
        x, i = FloorTensor(T), FloorTensor(IDX)
        y = torch.where(x[i] > 3, x[i] // 2, -1).clamp(min=0)
    assert type(y) is FloorTensor and y.device.type == "meta"
    assert torch.equal(y.elem, WANT)


def test_the_dispatch_mode_floors_run_the_cpu_kernels_on_real_values() -> None:
    with FloorDispatchMode():
        x, i = T.to("meta"), IDX.to("meta")
        y = torch.where(x[i] > 3, x[i] // 2, -1).clamp(min=0)
        z = torch.arange(3, device="meta") + 1  # a factory asked for on `meta` runs on the host
    assert type(y) is FloorTensor and y.device.type == "meta"
    assert torch.equal(y.elem, WANT) and torch.equal(z.elem, torch.arange(1, 4))
    with PassThroughDispatchMode():
        y = torch.where(T[IDX] > 3, T[IDX] // 2, -1).clamp(min=0)
    assert type(y) is torch.Tensor and torch.equal(y, WANT)


def test_every_configuration_is_timed_on_one_intra_op_thread(
    monkeypatch: pytest.MonkeyPatch, small_metadata_steps: None
) -> None:
    seen: list[int] = []

    def timing(*args: object) -> list[int]:
        seen.append(torch.get_num_threads())
        return [1]

    monkeypatch.setattr(emulated_cost, "time_steps", timing)
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        emulated_cost.cost_rows(steps=5, rounds=1)
        assert torch.get_num_threads() == 2  # the caller's pool is given back
    finally:
        torch.set_num_threads(saved)
    assert seen == [1] * len(emulated_cost.CONFIGS)


def test_a_run_keeps_every_sample_of_every_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], small_metadata_steps: None
) -> None:
    assert main(["check", "emulated-cost", "--out", str(tmp_path), "--steps", "10"]) == 0
    with (tmp_path / "emulated_cost.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert Counter(r["config"] for r in rows) == {c: 10 for c in emulated_cost.CONFIGS}
    assert {r["unit"] for r in rows} == {"ns"} and all(int(r["value"]) > 0 for r in rows)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["check"] == "emulated_cost" and meta["steps"] == 10 and "torch_version" in meta
    assert meta["intra_op_threads"] == 1
    text = capsys.readouterr().out
    assert (
        "x wrapper_floor" in text and text.count("x cpu_tensors") == len(emulated_cost.CONFIGS) - 1
    )
