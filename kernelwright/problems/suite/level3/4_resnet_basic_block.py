import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 3,
    "tags": ["block", "conv", "normalization", "residual"],
    "dtype": "float32",
    "description": "ResNet basic block (two 3x3 convs with inference-mode batch norm, identity shortcut).",
    # Two chained convolutions summing 576 products each: fp32 order-dependent rounding.
    "atol": 1e-3,
    "rtol": 1e-3,
}

batch_size = 32
channels = 64
height = 112
width = 112


def _bn_params(module: nn.Module, prefix: str, channels: int) -> None:
    module.register_parameter(f"{prefix}_weight", nn.Parameter(1.0 + 0.1 * torch.randn(channels)))
    module.register_parameter(f"{prefix}_bias", nn.Parameter(0.1 * torch.randn(channels)))
    module.register_buffer(f"{prefix}_mean", 0.1 * torch.randn(channels))
    module.register_buffer(f"{prefix}_var", 1.0 + 0.2 * torch.rand(channels))


class Model(nn.Module):
    """y = relu(bn2(conv2(relu(bn1(conv1(x))))) + x); batch norms use their running statistics."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        _bn_params(self, "bn1", channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        _bn_params(self, "bn2", channels)

    def _bn(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return F.batch_norm(
            x,
            getattr(self, f"{prefix}_mean"),
            getattr(self, f"{prefix}_var"),
            getattr(self, f"{prefix}_weight"),
            getattr(self, f"{prefix}_bias"),
            training=False,
            eps=1e-5,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self._bn(self.conv1(x), "bn1"))
        y = self._bn(self.conv2(y), "bn2")
        return torch.relu(y + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]


def get_input_variants():
    return [[torch.randn(5, channels, 97, 131)], [torch.randn(64, channels, 7, 9)]]


def get_small_inputs():
    return [torch.randn(2, 8, 16, 16)]


def get_small_init_inputs():
    return [8]


def get_small_input_variants():
    return [[torch.randn(1, 8, 13, 19)], [torch.randn(3, 8, 5, 7)]]
