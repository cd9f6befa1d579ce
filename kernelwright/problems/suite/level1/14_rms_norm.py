import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["normalization", "reduction"],
    "dtype": "float32",
    "description": "RMSNorm over the last dimension with a learned scale.",
}

batch_size = 16
seq_len = 2048
hidden = 4096
eps = 1e-6


class Model(nn.Module):
    """y = x / sqrt(mean(x^2, last dim) + eps) * weight (weight random, not ones)."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, eps]


def get_input_variants():
    return [[torch.randn(3, 999, hidden)], [torch.randn(4097, hidden)]]


def get_small_inputs():
    return [torch.randn(4, 16, 256)]


def get_small_init_inputs():
    return [256, eps]


def get_small_input_variants():
    return [[torch.randn(3, 7, 256)], [torch.randn(33, 256)]]
