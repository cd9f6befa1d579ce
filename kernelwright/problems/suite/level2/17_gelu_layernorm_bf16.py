import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["normalization", "fusion", "activation", "bf16"],
    "dtype": "bfloat16",
    "description": "Exact GELU, then LayerNorm over the last dimension, in bf16 (a transformer MLP's act-norm).",
}

# The `mlp.act_norm` region of the own-model flow's transformer block (NormFormer's LayerNorm after
# the MLP's GELU), at the shape it was measured: on an NVIDIA H200 torch.compile ran it slower than
# eager, and a fused one-pass kernel beat both (benchmarks/ownmodel/README.md).
batch_size = 8
seq_len = 1024
hidden = 4096


class Model(nn.Module):
    """y = layer_norm(gelu(x)) * weight + bias over the last dimension, eps = 1e-5, in bf16: the
    GELU (erf form, nn.GELU()'s default) is rounded to bf16 before the LayerNorm, which computes
    in fp32 and returns bf16; weight and bias are random (away from ones and zeros)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(torch.bfloat16))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(F.gelu(x), (self.hidden,), self.weight, self.bias, 1e-5)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden]


def get_input_variants():
    # Held-out shapes: an odd row count (2997 rows) and a 2-D input of 4097 rows.
    return [[torch.randn(3, 999, hidden, dtype=torch.bfloat16)], [torch.randn(4097, hidden, dtype=torch.bfloat16)]]


def get_small_inputs():
    return [torch.randn(4, 16, 256, dtype=torch.bfloat16)]


def get_small_init_inputs():
    return [256]


def get_small_input_variants():
    return [[torch.randn(3, 7, 256, dtype=torch.bfloat16)], [torch.randn(33, 256, dtype=torch.bfloat16)]]
