import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["matmul", "gemv", "memory-bound"],
    "dtype": "float32",
    "description": "Matrix-vector product (M x K) @ (K x 1).",
    # Dot products of length 12288: fp32 rounding depends on the summation order.
    "atol": 1e-3,
}

M = 16384
K = 12288


class Model(nn.Module):
    """y = A @ x with A (M x K) and x a column (K x 1); y is (M x 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []


def get_input_variants():
    return [[torch.randn(1000, 4097), torch.randn(4097, 1)], [torch.randn(3, 100003), torch.randn(100003, 1)]]


def get_small_inputs():
    return [torch.randn(128, 256), torch.randn(256, 1)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(33, 517), torch.randn(517, 1)], [torch.randn(2, 4099), torch.randn(4099, 1)]]
