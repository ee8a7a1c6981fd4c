"""What serving engines and training loops do around a model with PyTorch's own CUDA API: a
decode loop replaying a CUDA graph captured by hand, work spread over streams with events, a
DataLoader that pins its batches, and a Triton kernel of the user's whose grid comes from device
data."""

from __future__ import annotations

import torch
from torch import nn

from harness.programs.registry import Step, program

_VOCAB = 40


@program(
    "torch.cuda",
    "decode loop: a CUDA graph captured by hand (warm-up on a side stream, a graph pool), "
    "replayed per token, each token read on the host",
)
def cuda_graph_decode(device: torch.device) -> Step:
    torch.manual_seed(9)
    emb = nn.Embedding(_VOCAB, 16).to(device)
    head = nn.Linear(16, _VOCAB).to(device)
    static_tokens = torch.tensor([3, 17], device=device)
    # what ran before (an earlier run's graph and its pool) is returned now, so the capture's
    # empty_cache returns only this step's warm-up
    torch.cuda.empty_cache()

    def forward() -> torch.Tensor:
        return head(torch.tanh(emb(static_tokens))).argmax(-1)

    def step() -> list[list[int]]:
        static_tokens.copy_(torch.tensor([3, 17]))
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up, as PyTorch's CUDA-graph docs do
                forward()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle()):
                static_next = forward()
            tokens = []
            for _ in range(6):
                graph.replay()
                static_tokens.copy_(static_next)
                tokens.append(static_next.tolist())
        return tokens

    return step


@program(
    "torch.cuda",
    "two streams with priorities: a copy stream and a compute stream ordered by events, "
    "timed with timing events, the host waiting on an event and a stream",
)
def multi_stream_events(device: torch.device) -> Step:
    g = torch.Generator().manual_seed(10)
    host_batches = [torch.randn(64, 32, generator=g).pin_memory() for _ in range(3)]
    weight = torch.randn(32, 32, generator=g).to(device)

    def step() -> list[torch.Tensor]:
        copy_stream = torch.cuda.Stream(priority=-1)
        compute = torch.cuda.Stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        outs = []
        start.record(compute)
        for batch in host_batches:
            ready = torch.cuda.Event()
            with torch.cuda.stream(copy_stream):
                on_device = batch.to(device, non_blocking=True)
                ready.record(copy_stream)
            compute.wait_event(ready)
            with torch.cuda.stream(compute):
                on_device.record_stream(compute)
                outs.append(torch.relu(on_device @ weight).sum(0))
        end.record(compute)
        end.synchronize()
        assert start.elapsed_time(end) >= 0.0
        copy_stream.synchronize()
        return outs

    return step


@program(
    "torch.utils.data",
    "a DataLoader with pin_memory=True: each batch copied to the device non_blocking, "
    "one SGD step per batch, the loss read at the end",
)
def dataloader_pinned(device: torch.device) -> Step:
    torch.manual_seed(11)
    data = torch.utils.data.TensorDataset(torch.randn(48, 8), torch.randint(0, 3, (48,)))
    model = nn.Linear(8, 3).to(device)

    def step() -> list[torch.Tensor]:
        loader = torch.utils.data.DataLoader(data, batch_size=16, pin_memory=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return [torch.stack(losses).cpu(), *[p.detach() for p in model.parameters()]]

    return step


@program(
    "triton",
    "a user's Triton kernel launched over the tokens of a ragged batch: the grid is sized "
    "from the batch's lengths, read on the host",
    needs=("triton",),
)
def triton_ragged_grid(device: torch.device) -> Step:
    from harness.programs import user_kernel

    lengths = torch.tensor([5, 11, 3, 9], device=device)
    values = torch.arange(64, dtype=torch.float32, device=device)

    def step() -> torch.Tensor:
        return user_kernel.scaled_prefix(values, lengths)

    return step
