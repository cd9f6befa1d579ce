"""A test model for `kernelwright model profile` and `model extract`: an MLP block small enough
for a CPU (Linear → LayerNorm → GELU → Linear), with its example inputs.

    kernelwright model profile kernelwright/ownmodel/examples/mlp_block.py:mlp_block
"""

from __future__ import annotations

import torch
from torch import nn


class MlpBlock(nn.Module):
    def __init__(self, dim: int = 256, hidden: int = 1024) -> None:
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.norm(self.up(x))))


def mlp_block(batch: int = 128, dim: int = 256, hidden: int = 1024) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The factory: (module, example inputs)."""
    torch.manual_seed(0)
    return MlpBlock(dim, hidden).eval(), (torch.randn(batch, dim),)
