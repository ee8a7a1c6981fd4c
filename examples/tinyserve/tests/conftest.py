import pytest
import torch


@pytest.fixture
def device() -> torch.device:
    """The tests' device, picked as CPU-CI suites pick it."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture
def seq_lens(device: torch.device) -> torch.Tensor:
    return torch.tensor([5, 40, 17], device=device)
