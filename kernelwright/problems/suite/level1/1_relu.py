import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["elementwise", "activation"],
    "dtype": "float32",
    "description": "ReLU over a large 2-D tensor.",
}

batch_size = 16384
dim = 12288


class Model(nn.Module):
    """y = max(x, 0)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_input_variants():
    # Held-out shapes: an odd size that is not a multiple of any block size, and a 3-D input.
    return [[torch.randn(1000, 4097)], [torch.randn(16, 257, 1031)]]


def get_small_inputs():
    return [torch.randn(64, 1024)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 517)], [torch.randn(3, 7, 129)]]
