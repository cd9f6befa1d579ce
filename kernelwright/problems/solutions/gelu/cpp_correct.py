"""Oracle: correct C++ (CPU) exact GELU, 0.5 x (1 + erf(x / sqrt 2))."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "gelu_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu_forward: x must be float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    const float inv_sqrt2 = 0.70710678118654752440f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = 0.5f * v * (1.0f + std::erf(v * inv_sqrt2));
    }
    return out;
}
"""

gelu_ext = load_inline(
    name="kw_gelu_cpp_correct",
    cpp_sources=cpp_source,
    functions=["gelu_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_ext.gelu_forward(x)
