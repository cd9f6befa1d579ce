import torch
import torch.nn as nn

PROBLEM = {
    "level": 2,
    "tags": ["matmul", "batched", "fusion", "softmax", "attention"],
    "dtype": "float32",
    "description": "Attention probabilities: softmax(q @ k^T * scale) per batch (no mask).",
}

batch_size = 8
seq_len = 4096
head_dim = 128


class Model(nn.Module):
    """p[b] = softmax(q[b] @ k[b]^T * scale, dim=-1), scale = head_dim ** -0.5; p is (b, q, k)."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim**-0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.bmm(q, k.transpose(1, 2)) * self.scale, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, seq_len, head_dim), torch.randn(batch_size, seq_len, head_dim)]


def get_init_inputs():
    return [head_dim]


def get_input_variants():
    # Queries and keys may differ in length; head_dim is part of the problem's definition.
    return [
        [torch.randn(3, 1000, head_dim), torch.randn(3, 1000, head_dim)],
        [torch.randn(5, 77, head_dim), torch.randn(5, 4099, head_dim)],
    ]


def get_small_inputs():
    return [torch.randn(2, 64, 32), torch.randn(2, 64, 32)]


def get_small_init_inputs():
    return [32]


def get_small_input_variants():
    return [[torch.randn(3, 17, 32), torch.randn(3, 17, 32)], [torch.randn(1, 5, 32), torch.randn(1, 129, 32)]]
