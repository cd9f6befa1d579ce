import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 1,
    "tags": ["loss", "reduction"],
    "dtype": "float32",
    "description": "KL divergence between two row-wise probability distributions, batch mean.",
    "input_constraints": {0: "distribution", 1: "distribution"},
}

batch_size = 16384
dim = 8192


class Model(nn.Module):
    """loss = sum_ij t_ij * (log t_ij - log p_ij) / batch, i.e. F.kl_div(log p, t, 'batchmean')."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def _pair(*shape):
    return [torch.rand(*shape).softmax(dim=-1), torch.rand(*shape).softmax(dim=-1)]


def get_inputs():
    return _pair(batch_size, dim)


def get_init_inputs():
    return []


def get_input_variants():
    return [_pair(1000, 4097), _pair(3, 100003)]


def get_small_inputs():
    return _pair(64, 512)


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [_pair(33, 517), _pair(2, 4099)]
