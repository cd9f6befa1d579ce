import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["softmax", "reduction"],
    "dtype": "float32",
    "description": "Row-wise softmax over the last dimension of a 2-D tensor.",
}

batch_size = 16384
dim = 12288


class Model(nn.Module):
    """y[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k])."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097)], [torch.randn(20000, 999)]]


def get_small_inputs():
    return [torch.randn(64, 1024)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    # The second variant has more rows than the small default (exposes hard-coded row counts).
    return [[torch.randn(33, 517)], [torch.randn(130, 77)]]
