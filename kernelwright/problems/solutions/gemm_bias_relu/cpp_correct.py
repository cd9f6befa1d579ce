"""Oracle: correct C++ (CPU) fused linear + bias + ReLU; leading dims of x are flattened into rows."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(),
                "linear_relu_forward: tensors must be on the CPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "linear_relu_forward: tensors must be float32");
    TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "linear_relu_forward: bad shapes");
    TORCH_CHECK(bias.numel() == weight.size(0), "linear_relu_forward: bias size mismatch");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int64_t K = wc.size(1), N = wc.size(0);
    const int64_t M = K == 0 ? 0 : xc.numel() / K;
    auto sizes = xc.sizes().vec();
    sizes.back() = N;
    auto out = torch::empty(sizes, xc.options());
    const float* X = xc.data_ptr<float>();
    const float* W = wc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    float* Y = out.data_ptr<float>();
    for (int64_t m = 0; m < M; ++m) {
        const float* xrow = X + m * K;
        for (int64_t n = 0; n < N; ++n) {
            const float* wrow = W + n * K;
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) acc += xrow[k] * wrow[k];
            acc += b[n];
            Y[m * N + n] = acc > 0.0f ? acc : 0.0f;
        }
    }
    return out;
}
"""

gemm_ext = load_inline(
    name="kw_gemm_bias_relu_cpp_correct",
    cpp_sources=cpp_source,
    functions=["linear_relu_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same creation as Model: same weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.linear_relu_forward(x, self.linear.weight, self.linear.bias)
