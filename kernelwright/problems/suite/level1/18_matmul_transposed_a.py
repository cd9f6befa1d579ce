import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["matmul", "transpose"],
    "dtype": "float32",
    "description": "Matrix multiplication with a transposed first operand, C = A^T @ B.",
    # Dot products of length 8192: fp32 rounding depends on the summation order.
    "atol": 1e-3,
}

K = 8192
M = 2048
N = 4096


class Model(nn.Module):
    """C = A.T @ B with A stored (K x M) and B (K x N); C is (M x N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(4097, 1000), torch.randn(4097, 517)], [torch.randn(999, 3), torch.randn(999, 2051)]]


def get_small_inputs():
    return [torch.randn(256, 64), torch.randn(256, 96)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(100, 33), torch.randn(100, 65)], [torch.randn(7, 130), torch.randn(7, 3)]]
