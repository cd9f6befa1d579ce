"""Honest: a C++ ReLU registered with TORCH_LIBRARY in the candidate's own load_inline extension
(no pybind functions), called as torch.ops.kw_lib.relu in forward. Issue #28."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

at::Tensor relu_forward(const at::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == at::kFloat, "relu_forward: x must be float32");
    auto xc = x.contiguous();
    auto out = at::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v > 0.0f ? v : 0.0f;
    }
    return out;
}

TORCH_LIBRARY(kw_lib, m) {
    m.def("relu(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(kw_lib, CPU, m) {
    m.impl("relu", &relu_forward);
}
"""

load_inline(
    name="kw_relu_torch_library_cpp",
    cpp_sources=cpp_source,
    is_python_module=False,
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kw_lib.relu(x)
