import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 1,
    "tags": ["loss", "reduction"],
    "dtype": "float32",
    "description": "Huber loss (delta = 1) between two tensors, mean over all elements.",
}

batch_size = 16384
dim = 8192
delta = 1.0


class Model(nn.Module):
    """loss = mean(0.5 d^2 if |d| < delta else delta (|d| - delta / 2)), d = predictions - targets."""

    def __init__(self, delta: float = 1.0):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=self.delta)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [delta]


def get_input_variants():
    return [[torch.randn(1000, 4097), torch.randn(1000, 4097)], [torch.randn(3, 77, 9999), torch.randn(3, 77, 9999)]]


def get_small_inputs():
    return [torch.randn(64, 1024), torch.randn(64, 1024)]


def get_small_init_inputs():
    return [delta]


def get_small_input_variants():
    return [[torch.randn(33, 517), torch.randn(33, 517)], [torch.randn(3, 7, 129), torch.randn(3, 7, 129)]]
