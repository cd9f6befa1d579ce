import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["matmul", "gemm"],
    "dtype": "float32",
    "description": "Rectangular matrix multiplication (M x K) @ (K x N) with a long K.",
    # Dot products of length 8192: fp32 rounding depends on the summation order.
    "atol": 1e-3,
}

M = 2048
K = 8192
N = 4096


class Model(nn.Module):
    """C = A @ B with A (M x K), B (K x N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097), torch.randn(4097, 517)], [torch.randn(33, 8191), torch.randn(8191, 2000)]]


def get_small_inputs():
    return [torch.randn(64, 256), torch.randn(256, 96)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 100), torch.randn(100, 65)], [torch.randn(7, 513), torch.randn(513, 3)]]
