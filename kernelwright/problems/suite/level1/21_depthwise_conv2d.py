import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["conv", "depthwise"],
    "dtype": "float32",
    "description": "Depthwise 2-D convolution (groups = channels), 3x3, stride 1, padding 1.",
}

batch_size = 16
channels = 128
height = 256
width = 256
kernel_size = 3


class Model(nn.Module):
    """y[n, c] = conv2d(x[n, c], W[c]) + b[c]: each channel convolved with its own k x k filter."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]


def get_input_variants():
    return [[torch.randn(5, channels, 131, 77)], [torch.randn(33, channels, 64, 257)]]


def get_small_inputs():
    return [torch.randn(2, 8, 16, 16)]


def get_small_init_inputs():
    return [8, 3]


def get_small_input_variants():
    return [[torch.randn(1, 8, 13, 19)], [torch.randn(3, 8, 9, 31)]]
