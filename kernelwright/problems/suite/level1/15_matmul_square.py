import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["matmul", "gemm"],
    "dtype": "float32",
    "description": "Square matrix multiplication C = A @ B.",
    # Dot products of length 4096: the summation order changes fp32 rounding by up to ~1e-4
    # absolute on outputs near 0.
    "atol": 1e-3,
}

N = 4096


class Model(nn.Module):
    """C = A @ B for square A, B (N x N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 1000), torch.randn(1000, 1000)], [torch.randn(2049, 2049), torch.randn(2049, 2049)]]


def get_small_inputs():
    return [torch.randn(128, 128), torch.randn(128, 128)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(97, 97), torch.randn(97, 97)], [torch.randn(161, 161), torch.randn(161, 161)]]
