import torch
import torch.nn as nn

PROBLEM = {
    "level": 2,
    "tags": ["gemm", "fusion", "reduction"],
    "dtype": "float32",
    "description": "Linear layer, sigmoid, then sum over the output features.",
    # Dot products of length 4096, then a sum of 4096 sigmoids (~2000): fp32 order-dependent rounding.
    "atol": 1e-3,
}

batch_size = 8192
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """y[i, 0] = sum_j sigmoid(x[i] . W[j] + b[j]); output (batch, 1)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x)).sum(dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


def get_input_variants():
    return [[torch.randn(1000, in_features)], [torch.randn(7, in_features)]]


def get_small_inputs():
    return [torch.randn(64, 128)]


def get_small_init_inputs():
    return [128, 96]


def get_small_input_variants():
    return [[torch.randn(33, 128)], [torch.randn(1, 128)]]
