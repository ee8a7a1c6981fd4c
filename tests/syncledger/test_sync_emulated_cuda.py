"""Code behaves on the emulated device as it does on CUDA, or fails loudly: what Python sees of
the device, torch.cuda's answers, autocast, SDPA, torch.compile, threads and child processes."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn.functional as F

from syncledger import (
    EmulationError,
    SyncKind,
    SyncLedger,
    emulated_device,
    host_values,
    is_emulated,
)


def _cpp_device(t: torch.Tensor) -> torch.device:
    return torch._C.TensorBase.device.__get__(t)


def test_device_tensors_read_cuda_to_python_and_meta_to_cpp() -> None:
    gpu_here = torch.cuda.is_available()
    with emulated_device():
        t = torch.arange(3, device="cuda")
        assert (t.device, t.is_cuda, t.is_meta, t.get_device()) == (
            torch.device("cuda:0"),
            True,
            False,
            0,
        )
        assert _cpp_device(t).type == "meta"
        assert torch.cuda.is_available() and torch.cuda.device_count() == 1
        assert torch.cuda.get_device_capability() == (9, 0)
        assert torch.accelerator.current_accelerator() == torch.device("cuda")
    assert torch.cuda.is_available() == gpu_here  # the claim ends with the device


def test_code_that_says_cuda_runs_on_the_emulated_device_beside_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a machine with a GPU (stood in for here) "cuda" and torch.cuda's streams are the
    emulated device's as in CI, so a run there counts what it counts in CI."""
    from syncledger.emulated import mode

    monkeypatch.setattr(mode, "cuda_present", lambda: True)
    with emulated_device(), SyncLedger() as led:
        t = torch.arange(3, device="cuda")
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            total = int(t.sum())
        side.synchronize()
    assert total == 3 and is_emulated(t)
    assert [(e.kind, e.op) for e in led.events] == [
        (SyncKind.D2H_READ, "int"),
        (SyncKind.EXPLICIT, "Stream.synchronize"),
    ]


def test_assert_close_compares_values_as_on_cuda() -> None:
    with emulated_device():
        ones, zeros = torch.ones(3, device="cuda"), torch.zeros(3, device="cuda")
        torch.testing.assert_close(ones, ones.clone())
        with pytest.raises(AssertionError, match="not close"):
            torch.testing.assert_close(ones, zeros)


def test_code_branching_on_is_cuda_takes_its_cuda_path() -> None:
    def maybe_sync(t: torch.Tensor) -> int:
        return int(t.sum()) if t.is_cuda else 0

    with emulated_device(), SyncLedger() as led:
        assert maybe_sync(torch.ones(4, device="cuda")) == 4
    assert [e.kind for e in led.events] == [SyncKind.D2H_READ]


def test_torch_compile_runs_eagerly_with_the_same_syncs() -> None:
    def f(t: torch.Tensor) -> int:
        return int(t.max()) + 1

    compiled = torch.compile(f, backend="eager")
    with emulated_device(), SyncLedger() as led:
        assert compiled(torch.arange(5, device="cuda")) == 5
    assert [(e.kind, e.function) for e in led.events] == [(SyncKind.D2H_READ, "f")]


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_math_path_matches_the_cpu(causal: bool) -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = None if causal else torch.rand(5, 5) > 0.3
    want = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True
    )
    with emulated_device(), SyncLedger() as led:
        dev = [x.to("cuda") for x in (q, k, v)]
        dmask = None if mask is None else mask.to("cuda")
        got = F.scaled_dot_product_attention(
            *dev, attn_mask=dmask, is_causal=causal, enable_gqa=True
        )
        torch.testing.assert_close(host_values(got), want)
    assert led.count() == (3 if causal else 4)  # the moves in, no sync inside SDPA


def test_factories_inside_composites_hold_real_values() -> None:
    with emulated_device():
        q = torch.randn(1, 1, 3, 2).to("cuda")
        # the math path builds its causal mask with ones(..., query.options()) in C++
        out = torch.ops.aten._scaled_dot_product_attention_math(q, q, q, is_causal=True)[0]
        want = torch.ops.aten._scaled_dot_product_attention_math(
            *(host_values(q),) * 3, is_causal=True
        )[0]
        assert torch.equal(host_values(out), want)


def test_autocast_casts_as_cuda_autocast_does() -> None:
    with emulated_device():
        a = torch.randn(4, 4, device="cuda", requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            mm = a @ a
            lin = F.linear(a, a)
            soft = torch.softmax(mm, -1)  # fp32_set_opt_dtype: float32 out
            total = mm.sum()  # likewise
            exp = torch.exp(mm)  # fp32
        (lin.float().sum() + soft.sum()).backward()  # backward casts back
        assert (mm.dtype, lin.dtype, soft.dtype, total.dtype, exp.dtype) == (
            torch.bfloat16,
            torch.bfloat16,
            torch.float32,
            torch.float32,
            torch.float32,
        )
        assert a.grad is not None and a.grad.dtype == torch.float32
        assert (a @ a).dtype == torch.float32  # off outside the block
        assert torch.amp.GradScaler("cuda").is_enabled()


def test_to_accepts_every_signature_on_the_emulated_device() -> None:
    with emulated_device(), SyncLedger() as led:
        host = torch.arange(4)
        a = host.to(copy=True, dtype=torch.float64, device="cuda")
        b = host.to("cuda", torch.float16, True, True)  # positional non_blocking, copy
        c = a.to(b)  # another tensor's device and dtype
        d = a.to(dtype=torch.float32, copy=True)
        assert (a.dtype, b.dtype, c.dtype, d.dtype) == (
            torch.float64,
            torch.float16,
            torch.float16,
            torch.float32,
        )
        assert a.to("cuda") is a and a.to(a.device, copy=True) is not a
    # two moves in: a blocking one, and a non_blocking one from pageable memory (staged)
    assert [e.kind for e in led.events] == [SyncKind.H2D_BLOCKING, SyncKind.PAGEABLE_STAGED]


def test_host_only_arguments_fail_loudly_as_on_cuda() -> None:
    with emulated_device():
        seqs = torch.randn(3, 4, 2).to("cuda")
        with pytest.raises(EmulationError, match="must be a host"):
            torch.nn.utils.rnn.pack_padded_sequence(
                seqs, torch.tensor([4, 2, 1], device="cuda"), batch_first=True
            )
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            seqs, torch.tensor([4, 2, 1]), batch_first=True
        )
        assert not packed.batch_sizes.is_cuda  # on the host, as CUDA leaves it


def test_copies_and_pickles_keep_the_device_and_values() -> None:
    with emulated_device():
        t = torch.arange(3.0, device="cuda", requires_grad=True)
        for twin in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
            assert twin.is_cuda and twin.requires_grad
            assert torch.equal(host_values(twin), host_values(t))


def test_threads_started_on_the_device_run_on_it_and_a_process_ledger_sees_them() -> None:
    def work() -> None:
        torch.arange(4).to("cuda").sum().item()  # moved to "cuda": onto the emulated device

    with emulated_device(), SyncLedger() as mine, SyncLedger(scope="process") as every:
        worker = threading.Thread(target=work, name="worker")
        worker.start()
        worker.join()
        torch.ones(1, device="cuda").item()
    assert [e.thread for e in mine.events] == ["MainThread"]
    assert sorted((e.thread, e.kind.value) for e in every.events) == [
        ("MainThread", "d2h_read"),
        ("worker", "d2h_read"),
        ("worker", "h2d_blocking"),
    ]


@pytest.mark.skipif(not hasattr(os, "posix_spawn"), reason="needs os.posix_spawn")
@pytest.mark.parametrize(
    "start",
    [
        lambda: os.system("true"),
        lambda: os.waitpid(os.posix_spawn("/bin/sh", ["sh", "-c", "true"], os.environ), 0),
    ],
    ids=["os.system", "os.posix_spawn"],
)
def test_children_started_without_fork_are_counted(start) -> None:
    with SyncLedger() as led:
        start()
    assert led.unfollowed_children == 1


@pytest.mark.skipif(not hasattr(os, "spawnv"), reason="needs os.spawnv")
def test_a_forked_child_that_runs_exec_is_counted_as_not_followed() -> None:
    """os.spawnv forks, then the child runs exec: the program it runs has no ledger."""
    with SyncLedger() as led:
        os.spawnv(os.P_WAIT, sys.executable, [sys.executable, "-c", "pass"])
    assert len(led.children) == 1 and led.unfollowed_children == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_what_a_followed_child_starts_unfollowed_is_counted_in_the_parent() -> None:
    with SyncLedger() as led:
        pid = os.fork()
        if pid == 0:  # the child: two processes of its own, then out without any cleanup
            try:
                subprocess.run([sys.executable, "-c", "pass"], check=True)
                os.system("true")
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    assert led.children == [pid] and led.unfollowed_children == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_spool_that_cannot_be_written_does_not_fail_the_childs_exec() -> None:
    from syncledger.children import SpooledEvents
    from syncledger.state import open_ledgers

    with SyncLedger():
        pid = os.fork()
        if pid == 0:  # the child: its spool closed under it, then exec
            try:
                for ledger in open_ledgers():
                    if isinstance(ledger.events, SpooledEvents):
                        ledger.events._file.close()
                os.execv(sys.executable, [sys.executable, "-c", "pass"])
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_children_are_followed_and_others_counted() -> None:
    with emulated_device(), SyncLedger() as led:
        x = torch.arange(4, device="cuda")
        pid = os.fork()
        if pid == 0:  # the child: one sync, then out without any cleanup (never back to pytest)
            try:
                x.sum().item()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert [(e.pid, e.kind) for e in led.events] == [(pid, SyncKind.D2H_READ)]
    assert led.children == [pid] and led.unfollowed_children == 1
    assert (
        "1 child processes started without fork or run by exec were not followed"
        in led.format_table()
    )
