import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["normalization", "fusion", "reduction"],
    "dtype": "float32",
    "description": "L2-normalize each row, then multiply by a learned per-feature scale.",
}

batch_size = 65536
dim = 2048


class Model(nn.Module):
    """y = x / max(||x||_2, 1e-12) * scale over the last dim; scale random."""

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=2.0, dim=-1, eps=1e-12) * self.scale


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]


def get_input_variants():
    return [[torch.randn(1001, dim)], [torch.randn(3, 333, dim)]]


def get_small_inputs():
    return [torch.randn(64, 256)]


def get_small_init_inputs():
    return [256]


def get_small_input_variants():
    return [[torch.randn(33, 256)], [torch.randn(3, 5, 256)]]
