import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["conv", "fusion", "pooling"],
    "dtype": "float32",
    "description": "3x3 convolution (padding 1), ReLU, then 2x2 max pooling.",
    # Each conv output sums in_channels * 9 = 288 products: fp32 order-dependent rounding.
    "atol": 1e-3,
}

batch_size = 32
in_channels = 32
out_channels = 64
height = 256
width = 256


class Model(nn.Module):
    """y = maxpool2x2(relu(conv3x3(x) + b)); odd trailing rows/cols are dropped by the pool."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(torch.relu(self.conv(x)), 2)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


def get_input_variants():
    return [[torch.randn(7, in_channels, 127, 201)], [torch.randn(1, in_channels, 513, 65)]]


def get_small_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_small_init_inputs():
    return [4, 8]


def get_small_input_variants():
    return [[torch.randn(1, 4, 13, 19)], [torch.randn(3, 4, 9, 31)]]
