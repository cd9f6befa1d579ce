"""A test model for `kernelwright model profile`, `extract` and `verify`: a pre-norm attention
block (LayerNorm → qkv Linear → scaled dot product attention → output projection, plus the
residual), with its example inputs.

Two factories, because a spec names a factory and takes no arguments (and an environment
variable would not reach the harness's workers, which `model verify` builds the model in):

    kernelwright model profile kernelwright/ownmodel/examples/attention_block.py:attention_block
    kernelwright model profile kernelwright/ownmodel/examples/attention_block.py:attention_block_large --device cuda

`attention_block` is CPU-small (batch 2, sequence 64, width 128); `attention_block_large` is a
realistic GPU size (batch 8, sequence 1024, width 1024, 16 heads).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class AttentionBlock(nn.Module):
    def __init__(self, dim: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.0))  # projection + its dropout, timm-style

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        qkv = self.qkv(self.norm(x)).view(batch, seq, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (batch, heads, seq, head_dim)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(attended.transpose(1, 2).reshape(batch, seq, dim))


def attention_block(
    batch: int = 2, seq: int = 64, dim: int = 128, heads: int = 4
) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The factory at a CPU-small size: (module, example inputs)."""
    torch.manual_seed(0)
    return AttentionBlock(dim, heads).eval(), (torch.randn(batch, seq, dim),)


def attention_block_large() -> tuple[nn.Module, tuple[torch.Tensor]]:
    """A realistic GPU size: batch 8, sequence 1024, width 1024, 16 heads (float32; `--device cuda`
    moves it)."""
    return attention_block(batch=8, seq=1024, dim=1024, heads=16)
