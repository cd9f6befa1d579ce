import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["gemm", "fusion", "activation", "bf16"],
    "dtype": "bfloat16",
    "description": "SwiGLU up-projection in bf16: silu(x @ Wg^T) * (x @ Wu^T).",
}

batch_size = 4096
hidden = 4096
intermediate = 8192


class Model(nn.Module):
    """y = silu(x @ W_gate^T) * (x @ W_up^T), no biases, all in bf16."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate = nn.Linear(hidden, intermediate, bias=False).to(torch.bfloat16)
        self.up = nn.Linear(hidden, intermediate, bias=False).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gate(x)) * self.up(x)


def get_inputs():
    return [torch.randn(batch_size, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden, intermediate]


def get_input_variants():
    return [[torch.randn(1000, hidden, dtype=torch.bfloat16)], [torch.randn(3, 77, hidden, dtype=torch.bfloat16)]]


def get_small_inputs():
    return [torch.randn(16, 64, dtype=torch.bfloat16)]


def get_small_init_inputs():
    return [64, 96]


def get_small_input_variants():
    return [[torch.randn(9, 64, dtype=torch.bfloat16)], [torch.randn(2, 5, 64, dtype=torch.bfloat16)]]
