import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["reduction", "index"],
    "dtype": "float32",
    "description": "Index of the maximum along the last dimension (int64 output).",
}

batch_size = 16384
dim = 12288


class Model(nn.Module):
    """y[i] = argmax_j x[i, j], as int64 (ties: the first index, as torch.argmax)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097)], [torch.randn(9, 31, 2053)]]


def get_small_inputs():
    return [torch.randn(64, 1000)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 517)], [torch.randn(3, 5, 257)]]
