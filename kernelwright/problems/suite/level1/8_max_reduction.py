import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["reduction"],
    "dtype": "float32",
    "description": "Maximum over the middle dimension of a 3-D tensor.",
}

batch_size = 128
dim1 = 2048
dim2 = 768


class Model(nn.Module):
    """y[b, k] = max_j x[b, j, k] (dimension 1 is reduced and dropped)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=1).values


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(33, 517, 65)], [torch.randn(5, 4099, 129)]]


def get_small_inputs():
    return [torch.randn(8, 64, 96)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(3, 37, 41)], [torch.randn(5, 129, 7)]]
