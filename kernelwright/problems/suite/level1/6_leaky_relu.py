import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 1,
    "tags": ["elementwise", "activation"],
    "dtype": "float32",
    "description": "Leaky ReLU with a configurable negative slope.",
}

batch_size = 16384
dim = 12288
negative_slope = 0.01


class Model(nn.Module):
    """y = x if x > 0 else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [negative_slope]


def get_input_variants():
    # Held-out shapes: odd sizes that are not multiples of any block size, and a 3-D input.
    return [[torch.randn(1000, 4097)], [torch.randn(16, 257, 1031)]]


def get_small_inputs():
    return [torch.randn(64, 1024)]


def get_small_init_inputs():
    return [negative_slope]


def get_small_input_variants():
    return [[torch.randn(33, 517)], [torch.randn(3, 7, 129)]]
