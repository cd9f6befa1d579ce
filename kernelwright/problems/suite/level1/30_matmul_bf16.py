import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["matmul", "gemm", "bf16"],
    "dtype": "bfloat16",
    "description": "Square bf16 matrix multiplication (fp32 accumulation expected, bf16 output).",
}

N = 8192


class Model(nn.Module):
    """C = A @ B in bfloat16 (N x N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def _pair(m, k, n):
    return [torch.randn(m, k, dtype=torch.bfloat16), torch.randn(k, n, dtype=torch.bfloat16)]


def get_inputs():
    return _pair(N, N, N)


def get_init_inputs():
    return []


def get_input_variants():
    return [_pair(1000, 4097, 999), _pair(4099, 129, 5000)]


def get_small_inputs():
    return _pair(32, 64, 48)


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [_pair(17, 33, 9), _pair(5, 130, 31)]
