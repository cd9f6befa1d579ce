import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["normalization", "fusion", "residual"],
    "dtype": "float32",
    "description": "Add a bias and a residual, then LayerNorm (post-norm transformer epilogue).",
}

batch_size = 16
seq_len = 2048
hidden = 4096


class Model(nn.Module):
    """y = layer_norm(x + bias + residual) * weight + ln_bias, eps = 1e-5; all parameters random."""

    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.ln_bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x + self.bias + residual, (self.hidden,), self.weight, self.ln_bias, 1e-5)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden), torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]


def get_input_variants():
    return [
        [torch.randn(3, 999, hidden), torch.randn(3, 999, hidden)],
        [torch.randn(4097, hidden), torch.randn(4097, hidden)],
    ]


def get_small_inputs():
    return [torch.randn(4, 16, 256), torch.randn(4, 16, 256)]


def get_small_init_inputs():
    return [256]


def get_small_input_variants():
    return [[torch.randn(3, 7, 256), torch.randn(3, 7, 256)], [torch.randn(33, 256), torch.randn(33, 256)]]
