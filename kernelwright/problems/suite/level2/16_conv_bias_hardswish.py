import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["conv", "fusion", "activation"],
    "dtype": "float32",
    "description": "1x1 convolution (pointwise), an extra per-channel bias, then hardswish.",
}

batch_size = 32
in_channels = 128
out_channels = 256
height = 128
width = 128


class Model(nn.Module):
    """y = hardswish(conv1x1(x) + extra_bias[c]) where hardswish(z) = z * clamp(z + 3, 0, 6) / 6."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1)
        self.extra_bias = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(self.conv(x) + self.extra_bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


def get_input_variants():
    return [[torch.randn(7, in_channels, 97, 131)], [torch.randn(1, in_channels, 1, 4099)]]


def get_small_inputs():
    return [torch.randn(2, 8, 16, 16)]


def get_small_init_inputs():
    return [8, 16]


def get_small_input_variants():
    return [[torch.randn(1, 8, 13, 19)], [torch.randn(3, 8, 1, 33)]]
