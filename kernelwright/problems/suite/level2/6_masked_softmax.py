import torch
import torch.nn as nn

PROBLEM = {
    "level": 2,
    "tags": ["softmax", "fusion", "attention", "mask"],
    "dtype": "float32",
    "description": "Scale attention scores, mask out positions where mask == 0, softmax over keys.",
    "input_constraints": {1: "mask"},
}

batch_size = 8
num_heads = 16
seq_len = 1024
scale = 0.125


class Model(nn.Module):
    """y = softmax(where(mask == 0, -1e9, scores * scale), dim=-1).

    mask (batch, 1, q, k) broadcasts over heads. A fully masked row gives a uniform distribution
    (the fill is finite), never NaN.
    """

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        masked = (scores * self.scale).masked_fill(mask == 0, -1e9)
        return torch.softmax(masked, dim=-1)


def _inputs(b, h, q, k):
    return [torch.randn(b, h, q, k), (torch.rand(b, 1, q, k) < 0.8).float()]


def get_inputs():
    return _inputs(batch_size, num_heads, seq_len, seq_len)


def get_init_inputs():
    return [scale]


def get_input_variants():
    return [_inputs(3, num_heads, 1000, 1000), _inputs(2, 5, 77, 4099)]


def get_small_inputs():
    return _inputs(2, 4, 32, 32)


def get_small_init_inputs():
    return [scale]


def get_small_input_variants():
    return [_inputs(1, 3, 17, 17), _inputs(3, 2, 5, 129)]
