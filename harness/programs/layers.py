"""torch.nn's layers whose CUDA kernels read the device where their CPU kernels do not: the
transformer encoder's nested-tensor fast path for padded batches, and CTC's loss and its
gradient."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.programs.registry import Step, program


@program(
    "torch.nn",
    "TransformerEncoder in eval with a key padding mask: the nested-tensor fast path",
)
def transformer_encoder_padding(device: torch.device) -> Step:
    torch.manual_seed(12)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=2).to(device).eval()
    x = torch.randn(3, 7, 16).to(device)
    lengths = torch.tensor([7, 4, 2])
    padding = (torch.arange(7)[None, :] >= lengths[:, None]).to(device)

    def step() -> torch.Tensor:
        with torch.no_grad():
            return encoder(x, src_key_padding_mask=padding)

    return step


@program("torch.nn", "CTC: 3 training steps of a small acoustic model, lengths on the device")
def ctc_training(device: torch.device) -> Step:
    torch.manual_seed(13)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 6)).to(device)
    feats = torch.randn(3, 20, 8).to(device)
    targets = torch.randint(1, 6, (3, 7)).to(device)
    input_lengths = torch.tensor([20, 17, 12]).to(device)
    target_lengths = torch.tensor([7, 5, 3]).to(device)

    def step() -> list[torch.Tensor]:
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            log_probs = model(feats).log_softmax(-1).transpose(0, 1)
            loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return [*losses, *[p.detach() for p in model.parameters()]]

    return step
