import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["normalization", "fusion", "activation", "bf16"],
    "dtype": "bfloat16",
    "description": "RMSNorm of x times a SiLU gate (SwiGLU-style gated norm) in bf16.",
}

batch_size = 16
seq_len = 4096
hidden = 4096
eps = 1e-6


class Model(nn.Module):
    """y = rmsnorm(x) * weight * silu(gate), computed in fp32 internally, returned in bf16."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        y = normed * self.weight.float() * F.silu(gate.float())
        return y.to(torch.bfloat16)


def _inputs(*shape):
    return [torch.randn(*shape, dtype=torch.bfloat16), torch.randn(*shape, dtype=torch.bfloat16)]


def get_inputs():
    return _inputs(batch_size, seq_len, hidden)


def get_init_inputs():
    return [hidden, eps]


def get_input_variants():
    return [_inputs(3, 999, hidden), _inputs(4097, hidden)]


def get_small_inputs():
    return _inputs(2, 16, 256)


def get_small_init_inputs():
    return [256, eps]


def get_small_input_variants():
    return [_inputs(3, 7, 256), _inputs(33, 256)]
