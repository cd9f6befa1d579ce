import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["scan", "prefix-sum"],
    "dtype": "float32",
    "description": "Inclusive prefix sum along the last dimension.",
    # Running sums of up to 4096 values: a parallel scan rounds in a different order than a
    # sequential one, by up to ~1e-4 absolute where the running sum is near 0.
    "atol": 1e-3,
}

batch_size = 32768
dim = 4096


class Model(nn.Module):
    """y[..., j] = sum_{k <= j} x[..., k]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097)], [torch.randn(5, 77, 1999)]]


def get_small_inputs():
    return [torch.randn(64, 512)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 517)], [torch.randn(3, 5, 129)]]
