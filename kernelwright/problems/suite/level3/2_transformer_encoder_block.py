import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 3,
    "tags": ["block", "transformer", "attention", "gemm", "normalization"],
    "dtype": "float32",
    "description": "Pre-norm transformer encoder block: multi-head self-attention and a GELU MLP, both residual.",
    # Several chained GEMMs and a softmax over 512 keys: fp32 order-dependent rounding compounds.
    "atol": 1e-3,
    "rtol": 1e-3,
}

batch_size = 8
seq_len = 512
hidden = 1024
num_heads = 16


class Model(nn.Module):
    """h = x + proj(attn(LN1(x))); y = h + fc2(gelu(fc1(LN2(h)))).

    attn is non-causal multi-head attention written out: softmax(q k^T / sqrt(d)) v per head.
    """

    def __init__(self, hidden: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.num_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1)
        out = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(out)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, num_heads]


def get_input_variants():
    return [[torch.randn(3, 333, hidden)], [torch.randn(1, 1025, hidden)]]


def get_small_inputs():
    return [torch.randn(2, 16, 64)]


def get_small_init_inputs():
    return [64, 4]


def get_small_input_variants():
    return [[torch.randn(3, 7, 64)], [torch.randn(1, 33, 64)]]
