"""Oracle: correct C++ (CPU) LayerNorm over the last dimension (two-pass mean/variance in double)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(),
                "layer_norm_forward: tensors must be on the CPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "layer_norm_forward: tensors must be float32");
    TORCH_CHECK(x.dim() >= 1, "layer_norm_forward: x must have at least one dimension");
    const int64_t cols = x.size(-1);
    TORCH_CHECK(weight.numel() == cols && bias.numel() == cols, "layer_norm_forward: weight/bias size mismatch");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    const float* in = xc.data_ptr<float>();
    const float* w = wc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        double mean = 0.0;
        for (int64_t c = 0; c < cols; ++c) mean += row[c];
        mean /= (double)cols;
        double var = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const double d = row[c] - mean;
            var += d * d;
        }
        var /= (double)cols;
        const double rstd = 1.0 / std::sqrt(var + eps);
        float* orow = o + r * cols;
        for (int64_t c = 0; c < cols; ++c) orow[c] = (float)((row[c] - mean) * rstd) * w[c] + b[c];
    }
    return out;
}
"""

ln_ext = load_inline(
    name="kw_layer_norm_cpp_correct",
    cpp_sources=cpp_source,
    functions=["layer_norm_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        # Created exactly as Model creates them: same seed, same weights.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ln_ext.layer_norm_forward(x, self.weight, self.bias, self.eps)
