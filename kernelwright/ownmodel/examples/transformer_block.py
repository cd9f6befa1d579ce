"""A test model of real size for the own-model flow on a GPU: a pre-norm transformer block in
bfloat16 whose MLP has NormFormer's extra LayerNorm after its activation (fc1 → GELU → LayerNorm →
fc2, the GELU and its LayerNorm one `nn.Sequential`, `mlp.act_norm`), with its example inputs.

    kernelwright model profile kernelwright/ownmodel/examples/transformer_block.py:transformer_block_large --device cuda
    kernelwright model extract kernelwright/ownmodel/examples/transformer_block.py:transformer_block_large \\
        --region mlp.act_norm --device cuda

Its module regions are the Linears, the two block LayerNorms and `mlp.act_norm`: a chain of two
memory-bound ops eager runs as two kernels (a GELU, then a LayerNorm reading what the GELU
wrote) and a fused kernel runs in one pass (`scripts/gpu_ownmodel.sh` optimises it with the
scripted session `region_mlp_act_norm-cuda`).

Two factories, because a spec names a factory and takes no arguments: `transformer_block` is
CPU-small (batch 2, sequence 64, width 128, MLP 512, 4 heads); `transformer_block_large` a
realistic GPU size (batch 8, sequence 1024, width 1024, MLP 4096, 16 heads: 8192 tokens). Both
are bfloat16, the dtype such a block is trained and served in.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act_norm = nn.Sequential(nn.GELU(), nn.LayerNorm(hidden))  # NormFormer's FFN LayerNorm
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act_norm(self.fc1(x)))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 128, heads: int = 4, hidden: int = 512) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, seq, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (batch, heads, seq, head_dim)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.mlp(self.norm2(x))


def transformer_block(
    batch: int = 2, seq: int = 64, dim: int = 128, heads: int = 4, hidden: int = 512
) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The factory at a CPU-small size: (module, example inputs), bfloat16."""
    torch.manual_seed(0)
    model = TransformerBlock(dim, heads, hidden).to(torch.bfloat16).eval()
    with torch.no_grad():  # LayerNorm weights and biases away from ones and zeros, as a trained model's are
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.add_(0.1 * torch.randn_like(module.weight))
                module.bias.add_(0.1 * torch.randn_like(module.bias))
    return model, (torch.randn(batch, seq, dim, dtype=torch.bfloat16),)


def transformer_block_large() -> tuple[nn.Module, tuple[torch.Tensor]]:
    """A realistic GPU size: batch 8, sequence 1024, width 1024, MLP 4096, 16 heads (bfloat16;
    `--device cuda` moves it)."""
    return transformer_block(batch=8, seq=1024, dim=1024, heads=16, hidden=4096)
