import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["reduction"],
    "dtype": "float32",
    "description": "Sum over the last dimension of a large tensor.",
    # Rows of 12288 values: fp32 rounding differs with the summation order (tree vs sequential),
    # and a row whose sum is near 0 has no relative tolerance to absorb it.
    "atol": 1e-3,
}

batch_size = 16384
dim = 12288


class Model(nn.Module):
    """y[..., ] = sum_j x[..., j]: the last dimension is reduced and dropped."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097)], [torch.randn(7, 33, 3001)]]


def get_small_inputs():
    return [torch.randn(64, 2048)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 517)], [torch.randn(3, 5, 1999)]]
