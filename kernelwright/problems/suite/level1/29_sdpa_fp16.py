import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 1,
    "tags": ["attention", "fp16"],
    "dtype": "float16",
    # Tolerance: the fp16 default (atol = rtol = 1e-2). Outputs are convex combinations of v, so
    # |y| <= max |v|; the exp/sum order of a fused kernel moves results by a few fp16 ulps.
    "description": "Scaled dot-product attention (non-causal) on fp16 (batch, heads, seq, head_dim).",
}

batch_size = 16
num_heads = 16
seq_len = 4096
head_dim = 64


class Model(nn.Module):
    """y = softmax(q @ k^T / sqrt(head_dim)) @ v, per batch and head."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def _qkv(b, h, s, d):
    return [torch.randn(b, h, s, d, dtype=torch.float16) for _ in range(3)]


def get_inputs():
    return _qkv(batch_size, num_heads, seq_len, head_dim)


def get_init_inputs():
    return []


def get_input_variants():
    return [_qkv(3, num_heads, 1000, head_dim), _qkv(1, 5, 4097, head_dim)]


def get_small_inputs():
    return _qkv(1, 2, 64, 32)


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [_qkv(2, 2, 33, 32), _qkv(1, 3, 77, 32)]
