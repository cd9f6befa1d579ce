import torch
import torch.nn as nn

PROBLEM = {
    "level": 2,
    "tags": ["elementwise", "fusion", "attention", "rope"],
    "dtype": "float32",
    "description": "Apply rotary position embeddings (half-split form) to a (batch, heads, seq, dim) tensor.",
}

batch_size = 16
num_heads = 32
seq_len = 2048
head_dim = 128


class Model(nn.Module):
    """With x = [x1, x2] split in halves of the last dim and angle[s, i] = s * base^(-2i/head_dim):
    y = [x1 * cos - x2 * sin, x2 * cos + x1 * sin]. Positions are 0..seq-1 of the input."""

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        self.head_dim = head_dim
        self.base = base

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = self.head_dim // 2
        inv_freq = self.base ** (-torch.arange(0, half, device=x.device, dtype=torch.float32) * 2.0 / self.head_dim)
        pos = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)
        angle = torch.outer(pos, inv_freq)
        cos, sin = torch.cos(angle), torch.sin(angle)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def get_inputs():
    return [torch.randn(batch_size, num_heads, seq_len, head_dim)]


def get_init_inputs():
    return [head_dim]


def get_input_variants():
    return [[torch.randn(3, num_heads, 1000, head_dim)], [torch.randn(1, 7, 4099, head_dim)]]


def get_small_inputs():
    return [torch.randn(2, 4, 32, 64)]


def get_small_init_inputs():
    return [64]


def get_small_input_variants():
    return [[torch.randn(1, 3, 17, 64)], [torch.randn(3, 2, 129, 64)]]
