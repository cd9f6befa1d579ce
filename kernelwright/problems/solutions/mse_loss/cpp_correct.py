"""Oracle: correct C++ (CPU) mean squared error, fused subtract-square-sum in one pass (0-d output)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor mse_forward(torch::Tensor pred, torch::Tensor target) {
    TORCH_CHECK(pred.device().is_cpu() && target.device().is_cpu(), "mse_forward: tensors must be on the CPU");
    TORCH_CHECK(pred.scalar_type() == torch::kFloat32 && target.scalar_type() == torch::kFloat32,
                "mse_forward: tensors must be float32");
    TORCH_CHECK(pred.sizes() == target.sizes(), "mse_forward: shapes differ");
    auto pc = pred.contiguous();
    auto tc = target.contiguous();
    const int64_t n = pc.numel();
    const float* p = pc.data_ptr<float>();
    const float* t = tc.data_ptr<float>();
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = (double)p[i] - (double)t[i];
        acc += d * d;
    }
    auto out = torch::empty({}, pc.options());
    out.data_ptr<float>()[0] = (float)(acc / (double)n);  // n == 0 gives NaN, as torch.mean does
    return out;
}
"""

mse_ext = load_inline(
    name="kw_mse_loss_cpp_correct",
    cpp_sources=cpp_source,
    functions=["mse_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return mse_ext.mse_forward(predictions, targets)
