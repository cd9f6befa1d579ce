"""A small level-3-like problem (conv, batch norm, pooling, linear) whose forward launches many
kernels; used to record a multi-kernel Nsight Compute report."""

import torch
import torch.nn as nn

PROBLEM = {"level": 3, "tags": ["cnn"], "dtype": "float32", "description": "Tiny CNN for profiler fixtures."}


class Model(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def get_inputs():
    return [torch.randn(8, 3, 64, 64)]


def get_init_inputs():
    return [10]
