"""PyTorch's own libraries in the loop of a training step: torch.amp (autocast and
GradScaler), torch.optim, torch.nn.utils, torch.distributions with argument validation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.programs.registry import Step, program


def _mlp(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).to(device)


def _batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(12, 16, generator=g), torch.randint(0, 8, (12,), generator=g)
    return x.to(device), y.to(device)


@program("torch.amp", "3 steps: autocast (bf16), GradScaler, clip_grad_norm_, AdamW")
def amp_train_step(device: torch.device) -> Step:
    model = _mlp(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    x, y = _batch(device)

    def step() -> list[torch.Tensor]:
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        return [p.detach() for p in model.parameters()] + [loss.detach().float()]

    return step


@program("torch.optim", "Adam, SGD with Nesterov momentum, then LBFGS with its line search")
def optim_steps(device: torch.device) -> Step:
    model = _mlp(device)
    x, y = _batch(device)

    def loss_fn() -> torch.Tensor:
        return F.cross_entropy(model(x), y)

    def step() -> list[torch.Tensor]:
        for opt in (
            torch.optim.Adam(model.parameters(), lr=1e-2),
            torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, nesterov=True),
        ):
            for _ in range(2):
                opt.zero_grad()
                loss_fn().backward()
                opt.step()
        lbfgs = torch.optim.LBFGS(
            model.parameters(), lr=0.5, max_iter=4, line_search_fn="strong_wolfe"
        )

        def closure() -> torch.Tensor:
            lbfgs.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss

        lbfgs.step(closure)
        return [p.detach() for p in model.parameters()]

    return step


@program("torch.distributions", "sample and log_prob of four distributions, validate_args=True")
def distributions_validated(device: torch.device) -> Step:
    loc = torch.zeros(5, device=device)
    scale = torch.ones(5, device=device)
    probs = torch.full((5, 3), 1 / 3, device=device)
    eye = torch.eye(5, device=device)

    def step() -> list[torch.Tensor]:
        D = torch.distributions
        torch.manual_seed(4)
        dists = [
            D.Normal(loc, scale, validate_args=True),
            D.Categorical(probs=probs, validate_args=True),
            D.Beta(scale * 2, scale * 3, validate_args=True),
            D.MultivariateNormal(loc, eye, validate_args=True),
        ]
        return [d.log_prob(d.sample()) for d in dists]

    return step


@program(
    "torch.nn.utils",
    "pack_padded_sequence, an LSTM, pad_packed_sequence; clip with a nonfinite check",
)
def nn_utils_rnn_clip(device: torch.device) -> Step:
    torch.manual_seed(5)
    lstm = nn.LSTM(8, 16, batch_first=True).to(device)
    seqs = torch.randn(3, 7, 8).to(device)
    lengths = torch.tensor([7, 5, 2])  # on the host, as pack_padded_sequence requires

    def step() -> list[torch.Tensor]:
        packed = nn.utils.rnn.pack_padded_sequence(seqs, lengths, batch_first=True)
        out, _ = lstm(packed)
        padded, out_lengths = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        padded.sum().backward()
        norm = nn.utils.clip_grad_norm_(lstm.parameters(), 0.5, error_if_nonfinite=True)
        return [padded.detach(), out_lengths, norm]

    return step


@program("torch.nn", "an embedding language model: 3 SGD steps, the loss read each step")
def embedding_lm_train(device: torch.device) -> Step:
    torch.manual_seed(6)
    emb = nn.Embedding(50, 16).to(device)
    head = nn.Linear(16, 50).to(device)
    tokens = torch.randint(0, 50, (4, 9)).to(device)

    def step() -> list[float]:
        opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            logits = head(emb(tokens[:, :-1]))
            loss = F.cross_entropy(logits.reshape(-1, 50), tokens[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    return step
