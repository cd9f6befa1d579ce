import math

import torch
import torch.nn as nn

PROBLEM = {
    "level": 3,
    "tags": ["block", "attention", "causal", "gemm"],
    "dtype": "float32",
    "description": "GPT-style causal multi-head self-attention with QKV and output projections.",
    # GEMMs with reductions of length 768 and 1024 plus a softmax: fp32 order-dependent rounding.
    "atol": 1e-3,
    "rtol": 1e-3,
}

batch_size = 8
seq_len = 1024
hidden = 768
num_heads = 12


class Model(nn.Module):
    """y = proj(concat_h softmax(mask_causal(q_h k_h^T / sqrt(d))) v_h); position i sees j <= i."""

    def __init__(self, hidden: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.num_heads
        q, k, v = self.qkv(x).split(d, dim=-1)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        future = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        att = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, s, d))


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, num_heads]


def get_input_variants():
    return [[torch.randn(3, 333, hidden)], [torch.randn(1, 2049, hidden)]]


def get_small_inputs():
    return [torch.randn(2, 16, 64)]


def get_small_init_inputs():
    return [64, 4]


def get_small_input_variants():
    return [[torch.randn(3, 7, 64)], [torch.randn(1, 33, 64)]]
