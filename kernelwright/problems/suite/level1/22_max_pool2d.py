import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["pooling"],
    "dtype": "float32",
    "description": "2-D max pooling, 3x3 window, stride 2, padding 1 (NCHW).",
}

batch_size = 32
channels = 64
height = 256
width = 256


class Model(nn.Module):
    """y[n, c, i, j] = max of x[n, c] over the 3x3 window at (2i - 1, 2j - 1) (padding ignored)."""

    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [3, 2, 1]


def get_input_variants():
    return [[torch.randn(7, 33, 127, 201)], [torch.randn(2, 3, 1025, 999)]]


def get_small_inputs():
    return [torch.randn(2, 4, 32, 32)]


def get_small_init_inputs():
    return [3, 2, 1]


def get_small_input_variants():
    return [[torch.randn(1, 3, 13, 19)], [torch.randn(3, 5, 9, 31)]]
