import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["gemm", "fusion", "activation"],
    "dtype": "float32",
    "description": "Linear layer followed by exact (erf) GELU.",
    # Dot products of length 4096: fp32 rounding depends on the summation order.
    "atol": 1e-3,
}

batch_size = 4096
in_features = 4096
out_features = 8192


class Model(nn.Module):
    """y = gelu(x @ W^T + b), erf form."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


def get_input_variants():
    return [[torch.randn(999, in_features)], [torch.randn(2, 77, in_features)]]


def get_small_inputs():
    return [torch.randn(64, 128)]


def get_small_init_inputs():
    return [128, 160]


def get_small_input_variants():
    return [[torch.randn(33, 128)], [torch.randn(2, 7, 128)]]
