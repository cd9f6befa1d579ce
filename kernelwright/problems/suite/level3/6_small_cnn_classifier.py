import torch
import torch.nn as nn
import torch.nn.functional as F

PROBLEM = {
    "level": 3,
    "tags": ["network", "conv", "pooling", "gemm"],
    "dtype": "float32",
    "description": "A small image classifier: conv stem, pooling, a second conv, global average pool, linear head.",
    # Convolutions and a linear head chained: fp32 order-dependent rounding compounds.
    "atol": 1e-3,
    "rtol": 1e-3,
}

batch_size = 64
image_size = 224
num_classes = 1000


class Model(nn.Module):
    """logits = fc(avgpool(relu(conv2(maxpool(relu(bn(conv1(x))))))))

    conv1: 3 -> 64, 3x3 stride 2; bn: inference-mode batch norm with random statistics;
    maxpool 2x2; conv2: 64 -> 128, 3x3; global average pool; fc: 128 -> num_classes.
    """

    def __init__(self, num_classes: int, width: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False)
        self.bn_weight = nn.Parameter(1.0 + 0.1 * torch.randn(width))
        self.bn_bias = nn.Parameter(0.1 * torch.randn(width))
        self.register_buffer("bn_mean", 0.1 * torch.randn(width))
        self.register_buffer("bn_var", 1.0 + 0.2 * torch.rand(width))
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc = nn.Linear(2 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(x)
        y = F.batch_norm(y, self.bn_mean, self.bn_var, self.bn_weight, self.bn_bias, training=False, eps=1e-5)
        y = F.max_pool2d(torch.relu(y), 2)
        y = torch.relu(self.conv2(y))
        return self.fc(y.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [num_classes]


def get_input_variants():
    return [[torch.randn(7, 3, 199, 257)], [torch.randn(129, 3, 64, 64)]]


def get_small_inputs():
    return [torch.randn(2, 3, 32, 32)]


def get_small_init_inputs():
    return [10, 8]


def get_small_input_variants():
    return [[torch.randn(1, 3, 29, 37)], [torch.randn(3, 3, 16, 16)]]
