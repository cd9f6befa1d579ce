"""Oracle, known WRONG: C++ softmax hard-coded to the small default shape (64 x 1024).

The loops run to min(64, rows) and min(1024, cols); everything else keeps the zeros the output
was allocated with (never an out-of-bounds access). Right on the small default inputs and on
smaller inputs, wrong on the small variant with 130 rows and at the default size.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <limits>

constexpr int64_t ROWS = 64;    // BUG: the small default shape, baked in
constexpr int64_t COLS = 1024;

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "softmax_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_forward: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "softmax_forward: x must have at least one dimension");
    auto xc = x.contiguous();
    auto out = torch::zeros_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    const int64_t nr = std::min(ROWS, rows);
    const int64_t nc = std::min(COLS, cols);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < nr; ++r) {
        const float* row = in + r * cols;
        float* orow = o + r * cols;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t c = 0; c < nc; ++c) m = std::max(m, row[c]);
        double s = 0.0;
        for (int64_t c = 0; c < nc; ++c) {
            orow[c] = std::exp(row[c] - m);
            s += orow[c];
        }
        for (int64_t c = 0; c < nc; ++c) orow[c] = (float)(orow[c] / s);
    }
    return out;
}
"""

softmax_ext = load_inline(
    name="kw_softmax_cpp_wrong_hardcoded_shape",
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
