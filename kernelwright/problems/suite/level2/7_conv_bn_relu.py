import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 2,
    "tags": ["conv", "fusion", "normalization"],
    "dtype": "float32",
    "description": "3x3 convolution (no bias), inference-mode batch norm, ReLU.",
    # Each conv output sums in_channels * 9 = 576 products: fp32 order-dependent rounding.
    "atol": 1e-3,
}

batch_size = 16
in_channels = 64
out_channels = 128
height = 128
width = 128
eps = 1e-5


class Model(nn.Module):
    """y = relu((conv3x3(x) - running_mean) / sqrt(running_var + eps) * gamma + beta).

    The batch norm always uses its running statistics (inference mode, in train() too); the
    statistics and affine parameters are random so none of them is a no-op.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.gamma = nn.Parameter(1.0 + 0.1 * torch.randn(out_channels))
        self.beta = nn.Parameter(0.1 * torch.randn(out_channels))
        self.register_buffer("running_mean", 0.1 * torch.randn(out_channels))
        self.register_buffer("running_var", 1.0 + 0.2 * torch.rand(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y = F.batch_norm(y, self.running_mean, self.running_var, self.gamma, self.beta, training=False, eps=eps)
        return torch.relu(y)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


def get_input_variants():
    return [[torch.randn(5, in_channels, 97, 131)], [torch.randn(33, in_channels, 31, 17)]]


def get_small_inputs():
    return [torch.randn(2, 8, 16, 16)]


def get_small_init_inputs():
    return [8, 16]


def get_small_input_variants():
    return [[torch.randn(1, 8, 13, 19)], [torch.randn(3, 8, 9, 7)]]
