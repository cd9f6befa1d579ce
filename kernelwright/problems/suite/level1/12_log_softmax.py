import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["softmax", "reduction"],
    "dtype": "float32",
    "description": "Row-wise log-softmax over dimension 1 of a 2-D tensor.",
}

batch_size = 16384
dim = 12288


class Model(nn.Module):
    """y[i, j] = x[i, j] - log(sum_k exp(x[i, k])), computed stably."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097)], [torch.randn(3, 65537)]]


def get_small_inputs():
    return [torch.randn(64, 1024)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 517)], [torch.randn(2, 4099)]]
