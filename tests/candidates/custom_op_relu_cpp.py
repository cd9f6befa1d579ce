"""Honest: a C++ ReLU (load_inline) registered with torch.library.custom_op (and register_fake),
called as torch.ops.kw_custom.relu in forward. Issue #28: the static analysis must read the op as
the candidate's own kernel, not as PyTorch."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v > 0.0f ? v : 0.0f;
    }
    return out;
}
"""

relu_ext = load_inline(
    name="kw_relu_custom_op_cpp",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


@torch.library.custom_op("kw_custom::relu", mutates_args=())
def relu_op(x: torch.Tensor) -> torch.Tensor:
    return relu_ext.relu_forward(x)


@relu_op.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kw_custom.relu(x)
