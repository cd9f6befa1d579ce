"""Oracle, known WRONG: C++ ReLU that only processes full blocks of 64 elements.

The tail (numel % 64 elements) keeps the zeros the output was allocated with, so the result is
right whenever numel is a multiple of 64 (the default inputs) and wrong otherwise (the variants).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "relu_forward: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
    auto xc = x.contiguous();
    auto out = torch::zeros_like(xc);  // zeros: the unprocessed tail is deterministically wrong
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t blocks = xc.numel() / 64;  // BUG: the last partial block is dropped
    for (int64_t b = 0; b < blocks; ++b) {
        for (int64_t j = 0; j < 64; ++j) {
            const int64_t i = b * 64 + j;
            o[i] = in[i] > 0.0f ? in[i] : 0.0f;
        }
    }
    return out;
}
"""

relu_ext = load_inline(
    name="kw_relu_cpp_wrong_tail64",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
