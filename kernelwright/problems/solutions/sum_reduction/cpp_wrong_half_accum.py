"""Oracle, known WRONG: C++ sum whose running total is rounded to fp16 after every addition.

With rows of 2048 (small) or 12288 (default) values the running sum reaches tens to hundreds,
where one fp16 step is 1/64 to 1/4: the rounding errors add up to ~0.1-1 absolute, far beyond
the problem's tolerance (atol 1e-3, rtol 1e-4). Wrong on the default inputs already.
"""

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
        c10::Half acc = 0.0f;  // BUG: half-precision accumulator
        const float* row = in + r * cols;
        for (int64_t c = 0; c < cols; ++c) acc = c10::Half(static_cast<float>(acc) + row[c]);
        o[r] = static_cast<float>(acc);
    }
    return out;
}
"""

sum_ext = load_inline(
    name="kw_sum_reduction_cpp_wrong_half_accum",
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
