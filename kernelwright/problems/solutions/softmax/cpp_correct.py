"""Oracle: correct C++ (CPU) softmax over the last dimension (max-subtracted, three passes per row)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <limits>

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "softmax_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_forward: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "softmax_forward: x must have at least one dimension");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float* orow = o + r * cols;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t c = 0; c < cols; ++c) m = row[c] > m ? row[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const float e = std::exp(row[c] - m);
            orow[c] = e;
            s += e;
        }
        const float inv = (float)(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) orow[c] *= inv;
    }
    return out;
}
"""

softmax_ext = load_inline(
    name="kw_softmax_cpp_correct",
    cpp_sources=cpp_source,
    functions=["softmax_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x)
