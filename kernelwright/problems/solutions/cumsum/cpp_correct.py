"""Oracle: correct C++ (CPU) inclusive prefix sum along the last dimension (double running sum)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor cumsum_last_dim(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "cumsum_last_dim: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "cumsum_last_dim: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "cumsum_last_dim: x must have at least one dimension");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double run = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            run += in[r * cols + c];
            o[r * cols + c] = (float)run;
        }
    }
    return out;
}
"""

cumsum_ext = load_inline(
    name="kw_cumsum_cpp_correct",
    cpp_sources=cpp_source,
    functions=["cumsum_last_dim"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cumsum_ext.cumsum_last_dim(x)
