import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["normalization", "fusion", "activation"],
    "dtype": "float32",
    "description": "GroupNorm (32 groups) over NCHW activations followed by SiLU.",
}

batch_size = 32
channels = 256
height = 128
width = 128
num_groups = 32


class Model(nn.Module):
    """y = silu(group_norm(x, num_groups) * weight + bias), eps = 1e-5; weight and bias random."""

    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.num_groups = num_groups
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(F.group_norm(x, self.num_groups, self.weight, self.bias, 1e-5))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]


def get_input_variants():
    return [[torch.randn(5, channels, 97, 131)], [torch.randn(3, channels, 1, 4099)]]


def get_small_inputs():
    return [torch.randn(2, 16, 8, 8)]


def get_small_init_inputs():
    return [4, 16]


def get_small_input_variants():
    return [[torch.randn(3, 16, 5, 7)], [torch.randn(1, 16, 1, 33)]]
