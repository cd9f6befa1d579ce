import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["conv", "conv2d"],
    "dtype": "float32",
    "description": "2-D convolution, 3x3 kernel, stride 1, padding 1, with bias (NCHW).",
    # Each output sums in_channels * 9 = 576 products: fp32 order-dependent rounding.
    "atol": 1e-3,
}

batch_size = 16
in_channels = 64
out_channels = 128
height = 256
width = 256
kernel_size = 3


class Model(nn.Module):
    """y = conv2d(x, W, b) with a k x k kernel, stride 1 and 'same' padding (k // 2)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


def get_input_variants():
    # Batch and spatial sizes vary; channel counts are fixed by the weights.
    return [[torch.randn(7, in_channels, 127, 201)], [torch.randn(1, in_channels, 513, 33)]]


def get_small_inputs():
    return [torch.randn(2, 8, 16, 16)]


def get_small_init_inputs():
    return [8, 16, 3]


def get_small_input_variants():
    return [[torch.randn(1, 8, 13, 19)], [torch.randn(3, 8, 9, 31)]]
