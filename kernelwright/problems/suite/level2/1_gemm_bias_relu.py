import torch
import torch.nn as nn

PROBLEM = {
    "level": 2,
    "tags": ["gemm", "fusion", "activation"],
    "dtype": "float32",
    "description": "Linear layer (x @ W^T + b) followed by ReLU.",
    # Dot products of length 4096: fp32 rounding depends on the summation order.
    "atol": 1e-3,
}

batch_size = 4096
in_features = 4096
out_features = 4096


class Model(nn.Module):
    """y = relu(x @ W^T + b) over the last dim of x (leading dims are batch)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


def get_input_variants():
    return [[torch.randn(1000, in_features)], [torch.randn(3, 333, in_features)]]


def get_small_inputs():
    return [torch.randn(64, 128)]


def get_small_init_inputs():
    return [128, 96]


def get_small_input_variants():
    return [[torch.randn(33, 128)], [torch.randn(3, 5, 128)]]
