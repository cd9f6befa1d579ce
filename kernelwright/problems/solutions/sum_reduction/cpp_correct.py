"""Oracle: correct C++ (CPU) sum over the last dimension (double accumulator per row)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor sum_last_dim(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "sum_last_dim: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_last_dim: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "sum_last_dim: x must have at least one dimension");
    auto xc = x.contiguous();
    auto sizes = xc.sizes().vec();
    const int64_t cols = sizes.back();
    sizes.pop_back();
    auto out = torch::empty(sizes, xc.options());
    const int64_t rows = out.numel();
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double acc = 0.0;
        const float* row = in + r * cols;
        for (int64_t c = 0; c < cols; ++c) acc += row[c];
        o[r] = (float)acc;
    }
    return out;
}
"""

sum_ext = load_inline(
    name="kw_sum_reduction_cpp_correct",
    cpp_sources=cpp_source,
    functions=["sum_last_dim"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_last_dim(x)
