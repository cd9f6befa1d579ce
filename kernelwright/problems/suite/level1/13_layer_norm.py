import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 1,
    "tags": ["normalization", "reduction"],
    "dtype": "float32",
    "description": "LayerNorm over the last dimension with a learned scale and shift.",
}

batch_size = 16
seq_len = 2048
hidden = 4096
eps = 1e-5


class Model(nn.Module):
    """y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias over the last dim (biased variance).

    weight and bias are random (not ones/zeros) so that a kernel ignoring them is caught.
    """

    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.hidden = hidden
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.hidden,), self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, eps]


def get_input_variants():
    # Only the leading dims vary: the weights fix the last one.
    return [[torch.randn(3, 999, hidden)], [torch.randn(4097, hidden)]]


def get_small_inputs():
    return [torch.randn(4, 16, 256)]


def get_small_init_inputs():
    return [256, eps]


def get_small_input_variants():
    return [[torch.randn(3, 7, 256)], [torch.randn(33, 256)]]
