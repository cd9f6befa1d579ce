import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["pooling"],
    "dtype": "float32",
    "description": "2-D average pooling, 4x4 window, stride 4, no padding (NCHW).",
}

batch_size = 32
channels = 64
height = 256
width = 256


class Model(nn.Module):
    """y[n, c, i, j] = mean of x[n, c, 4i:4i+4, 4j:4j+4] (trailing rows/cols that do not fill a window are dropped)."""

    def __init__(self, kernel_size: int = 4):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [4]


def get_input_variants():
    return [[torch.randn(7, 33, 127, 201)], [torch.randn(2, 3, 1025, 999)]]


def get_small_inputs():
    return [torch.randn(2, 4, 32, 32)]


def get_small_init_inputs():
    return [4]


def get_small_input_variants():
    return [[torch.randn(1, 3, 13, 19)], [torch.randn(3, 5, 9, 31)]]
