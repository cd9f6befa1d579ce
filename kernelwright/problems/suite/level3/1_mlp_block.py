import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 3,
    "tags": ["block", "mlp", "gemm", "normalization"],
    "dtype": "float32",
    "description": "Pre-norm transformer MLP block: x + fc2(gelu(fc1(layer_norm(x)))).",
    # Chained GEMMs with reductions of length 2048 and 8192: fp32 order-dependent rounding.
    "atol": 1e-3,
    "rtol": 1e-3,
}

batch_size = 8
seq_len = 512
hidden = 2048
expansion = 4


class Model(nn.Module):
    """y = x + W2 gelu(W1 LN(x) + b1) + b2, with a 4x hidden expansion and exact GELU."""

    def __init__(self, hidden: int, expansion: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, hidden * expansion)
        self.fc2 = nn.Linear(hidden * expansion, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, expansion]


def get_input_variants():
    return [[torch.randn(3, 333, hidden)], [torch.randn(1, 1025, hidden)]]


def get_small_inputs():
    return [torch.randn(2, 16, 64)]


def get_small_init_inputs():
    return [64, expansion]


def get_small_input_variants():
    return [[torch.randn(3, 7, 64)], [torch.randn(1, 33, 64)]]
