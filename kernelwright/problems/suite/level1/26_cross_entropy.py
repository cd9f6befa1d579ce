import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 1,
    "tags": ["loss", "softmax", "reduction"],
    "dtype": "float32",
    "description": "Cross-entropy of logits against integer class targets, mean over the batch.",
    "input_constraints": {1: "indices:1000"},
}

batch_size = 131072
num_classes = 1000  # the same at every size: the targets' constraint bounds them by it


class Model(nn.Module):
    """loss = mean_i (logsumexp(logits[i]) - logits[i, targets[i]]) (0-d output)."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []


def get_input_variants():
    return [
        [torch.randn(1001, num_classes), torch.randint(0, num_classes, (1001,))],
        [torch.randn(7, num_classes), torch.randint(0, num_classes, (7,))],
    ]


def get_small_inputs():
    return [torch.randn(16, num_classes), torch.randint(0, num_classes, (16,))]


def get_small_init_inputs():
    return []


def get_small_input_variants():
    return [
        [torch.randn(33, num_classes), torch.randint(0, num_classes, (33,))],
        [torch.randn(1, num_classes), torch.randint(0, num_classes, (1,))],
    ]
