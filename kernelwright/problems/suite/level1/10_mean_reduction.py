import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["reduction"],
    "dtype": "float32",
    "description": "Mean over the last dimension of a 3-D tensor.",
}

batch_size = 64
seq_len = 1024
hidden = 3072


class Model(nn.Module):
    """y[b, s] = mean_d x[b, s, d]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(7, 333, 3001)], [torch.randn(129, 65, 1025)]]


def get_small_inputs():
    return [torch.randn(4, 32, 256)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(3, 17, 131)], [torch.randn(5, 9, 1001)]]
