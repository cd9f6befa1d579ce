import torch
import torch.nn as nn

PROBLEM = {
    "level": 2,
    "tags": ["gemm", "fusion", "residual"],
    "dtype": "float32",
    "description": "Square linear layer, scaled, plus the input as a residual.",
    # Dot products of length 4096: fp32 rounding depends on the summation order.
    "atol": 1e-3,
}

batch_size = 8192
hidden = 4096
scale = 0.5


class Model(nn.Module):
    """y = (x @ W^T + b) * scale + x (W is hidden x hidden)."""

    def __init__(self, hidden: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale + x


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, scale]


def get_input_variants():
    return [[torch.randn(1000, hidden)], [torch.randn(3, 333, hidden)]]


def get_small_inputs():
    return [torch.randn(64, 128)]


def get_small_init_inputs():
    return [128, scale]


def get_small_input_variants():
    return [[torch.randn(33, 128)], [torch.randn(3, 5, 128)]]
