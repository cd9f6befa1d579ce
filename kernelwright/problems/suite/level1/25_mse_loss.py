import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["loss", "reduction"],
    "dtype": "float32",
    "description": "Mean squared error between two tensors, reduced to a scalar.",
}

batch_size = 16384
dim = 8192


class Model(nn.Module):
    """loss = mean((predictions - targets)^2) over all elements (0-d output)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097), torch.randn(1000, 4097)], [torch.randn(3, 77, 9999), torch.randn(3, 77, 9999)]]


def get_small_inputs():
    return [torch.randn(64, 1024), torch.randn(64, 1024)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 517), torch.randn(33, 517)], [torch.randn(3, 7, 129), torch.randn(3, 7, 129)]]
