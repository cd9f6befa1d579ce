import torch
import torch.nn as nn

PROBLEM = {
    "level": 1,
    "tags": ["matmul", "batched"],
    "dtype": "float32",
    "description": "Batched matrix multiplication (b, M, K) @ (b, K, N).",
}

batch = 128
M = 512
K = 1024
N = 1024


class Model(nn.Module):
    """C[i] = A[i] @ B[i] for every i in the batch."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(batch, M, K), torch.randn(batch, K, N)]


def get_init_inputs():
    return []


def get_input_variants():
    return [
        [torch.randn(33, 257, 1000), torch.randn(33, 1000, 131)],
        [torch.randn(3, 1025, 77), torch.randn(3, 77, 999)],
    ]


def get_small_inputs():
    return [torch.randn(4, 32, 64), torch.randn(4, 64, 48)]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [[torch.randn(3, 17, 33), torch.randn(3, 33, 9)], [torch.randn(5, 1, 100), torch.randn(5, 100, 31)]]
