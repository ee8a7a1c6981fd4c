"""CUDA graphs, streams, events, generators and user Triton kernels on the emulated device: they
run as on CUDA, compute what eager code computes, and sync where CUDA syncs."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn

from syncledger import SyncKind, SyncLedger, emulated_device, host_values

MIB = 1 << 20


def _kinds(led: SyncLedger) -> list[tuple[str, str]]:
    return [(e.kind.value, e.op) for e in led.events]


def test_a_captured_graph_replays_its_work_on_the_static_tensors_without_a_sync() -> None:
    with emulated_device():
        torch.manual_seed(0)
        lin = nn.Linear(4, 4).cuda()
        static_in = torch.zeros(4, device="cuda")
        graph = torch.cuda.CUDAGraph()
        torch.cuda.empty_cache()  # what earlier code freed is not this capture's
        with torch.no_grad():
            with SyncLedger() as capture, torch.cuda.graph(graph):
                acc = torch.zeros(4, device="cuda")  # a factory: made again at each replay
                acc.add_(static_in)
                static_out = lin(acc) * 2
            with SyncLedger() as replays:
                for i in range(3):
                    static_in.copy_(torch.full((4,), float(i)).pin_memory(), non_blocking=True)
                    graph.replay()
                    want = lin(torch.full((4,), float(i), device="cuda")) * 2
                    assert torch.equal(host_values(static_out), host_values(want))
    # torch.cuda.graph synchronizes first, then empties the cache (nothing to return here)
    assert _kinds(capture) == [("explicit", "cuda.synchronize")]
    assert replays.count() == 0


def test_empty_cache_before_a_capture_returns_the_warm_ups_blocks() -> None:
    """PyTorch's recipe warms up on a side stream, whose freed blocks the graph's `empty_cache`
    returns to the driver (an allocator sync on an H200 too)."""
    with emulated_device():
        x = torch.ones(8, device="cuda")
        torch.cuda.empty_cache()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            (x * 2).sum()
        graph = torch.cuda.CUDAGraph()
        with SyncLedger() as led, torch.cuda.graph(graph):
            x.mul_(2)
    assert _kinds(led) == [("explicit", "cuda.synchronize"), ("allocator", "empty_cache")]


@pytest.mark.parametrize(
    "sync",
    [lambda x: x.sum().item(), lambda x: torch.cuda.synchronize(), lambda x: x[x > 0]],
    ids=["item", "synchronize", "mask_index"],
)
def test_a_sync_inside_a_capture_fails_as_cuda_fails_it(sync) -> None:  # type: ignore[no-untyped-def]
    error = getattr(torch, "AcceleratorError", RuntimeError)
    with emulated_device():
        x = torch.ones(4, device="cuda")
        graph = torch.cuda.CUDAGraph()
        failed = "operation failed due to a previous error during capture"
        with pytest.raises(error, match=failed) as info, torch.cuda.graph(graph):
            sync(x)  # refused; then capture_end fails, as on CUDA
        assert "operation not permitted when stream is capturing" in str(info.value.__context__)
        assert not torch.cuda.is_current_stream_capturing()
        with SyncLedger() as led:  # the device works on after the failed capture
            x.sum().item()
    assert led.count() == 1


def test_graphed_callables_train_as_eager_code_does() -> None:
    def train(graphed: bool) -> list[torch.Tensor]:
        torch.manual_seed(1)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sample = torch.randn(3, 4, device="cuda")
        step = torch.cuda.make_graphed_callables(model, (sample,)) if graphed else model
        for i in range(3):
            torch.manual_seed(10 + i)
            opt.zero_grad(set_to_none=True)  # as PyTorch's example: the grads alias the graph's
            step(torch.randn(3, 4, device="cuda")).square().sum().backward()
            opt.step()
        return [host_values(p).clone() for p in model.parameters()]

    with emulated_device():
        eager, graphed = train(False), train(True)
    for e, g in zip(eager, graphed):
        torch.testing.assert_close(g, e)


def test_cuda_side_objects_a_test_suite_builds() -> None:
    with emulated_device(), SyncLedger() as led:
        gen = torch.Generator(device="cuda").manual_seed(3)
        assert gen.device == torch.device("cuda", 0) and isinstance(gen, torch.Generator)
        a = torch.randn(4, device="cuda", generator=gen)
        b = torch.randn(4, device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
        assert torch.equal(host_values(a), host_values(b))
        assert isinstance(torch.Generator(), torch.Generator)
        stream = torch.cuda.Stream(priority=-1)
        assert stream.priority == -1 and stream != torch.cuda.current_stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        with torch.cuda.stream(stream):
            c = a * 2
            c.record_stream(stream)
        end.record()
        end.synchronize()
        assert start.elapsed_time(end) >= 0.0
        pool = torch.cuda.graph_pool_handle()
        assert pool != torch.cuda.graph_pool_handle()
    assert _kinds(led) == [("explicit", "Event.synchronize")]


def test_a_tied_weight_moves_once_and_stays_tied() -> None:
    """`Module.to` keeps each parameter's own object, as `param.data = moved` does on CUDA."""
    torch.manual_seed(2)
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = nn.ModuleList([emb, head])
    with emulated_device(), SyncLedger() as led:
        model.to("cuda")
        assert head.weight is emb.weight and head.weight.is_cuda
    assert [e.kind for e in led.events] == [SyncKind.H2D_BLOCKING]


def test_an_in_place_view_op_reshapes_the_device_tensor_too() -> None:
    with emulated_device():
        x = torch.arange(6, device="cuda").view(2, 3)
        x.transpose_(0, 1)
        assert x.shape == (3, 2) and x.stride() == host_values(x).stride()
        assert x.reshape(6).tolist() == [0, 3, 1, 4, 2, 5]


def test_the_transformer_fast_path_runs_on_nested_tensors_as_on_cuda() -> None:
    torch.manual_seed(4)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    with torch.no_grad():
        want = encoder(x, src_key_padding_mask=pad)
        with emulated_device():
            encoder.cuda()
            dx = x.cuda()
            # its gate: the emulated device's own function mode is not the program's
            assert not torch.overrides.has_torch_function((dx,))
            got = encoder(dx, src_key_padding_mask=pad.cuda())
    torch.testing.assert_close(host_values(got), want)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_a_user_triton_kernel_runs_interpreted_and_its_grid_makes_the_sync() -> None:
    with emulated_device():
        import triton
        import triton.language as tl

        @triton.jit
        def twice_plus_one(src, dst, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            keep = offs < n
            tl.store(dst + offs, tl.load(src + offs, mask=keep) * 2 + 1, mask=keep)

        lengths = torch.tensor([3, 6], device="cuda")
        src = torch.arange(16, dtype=torch.float32, device="cuda")
        dst = torch.zeros_like(src)
        n = 9
        with SyncLedger() as led:
            twice_plus_one[(triton.cdiv(n, 4),)](src, dst, n, BLOCK=4)
            grid = lambda meta: (triton.cdiv(int(meta["src"][lengths].sum()), meta["BLOCK"]),)  # noqa: E731
            twice_plus_one[grid](src, dst, n, BLOCK=4)
    assert host_values(dst).tolist() == [2 * i + 1 for i in range(9)] + [0.0] * 7
    assert [e.kind for e in led.events] == [SyncKind.D2H_READ]
