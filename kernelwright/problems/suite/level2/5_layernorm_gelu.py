import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["normalization", "fusion", "activation"],
    "dtype": "float32",
    "description": "LayerNorm over the last dimension followed by exact GELU.",
}

batch_size = 16
seq_len = 2048
hidden = 4096


class Model(nn.Module):
    """y = gelu(layer_norm(x) * weight + bias); weight and bias are random, eps = 1e-5."""

    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.layer_norm(x, (self.hidden,), self.weight, self.bias, 1e-5))


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]


def get_input_variants():
    return [[torch.randn(3, 999, hidden)], [torch.randn(4097, hidden)]]


def get_small_inputs():
    return [torch.randn(4, 16, 256)]


def get_small_init_inputs():
    return [256]


def get_small_input_variants():
    return [[torch.randn(3, 7, 256)], [torch.randn(33, 256)]]
