"""Oracle: correct CUDA RMSNorm over the last dimension: one block per row, a shared-memory
reduction of the sum of squares, then the scaled write; any row length."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int THREADS = 256;

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y, int64_t cols, float eps) {
    __shared__ float red[THREADS];
    const float* row = x + blockIdx.x * cols;
    float* orow = y + blockIdx.x * cols;
    const int t = threadIdx.x;
    float acc = 0.0f;
    for (int64_t c = t; c < cols; c += THREADS) acc += row[c] * row[c];
    red[t] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    const float rstd = rsqrtf(red[0] / (float)cols + eps);
    for (int64_t c = t; c < cols; c += THREADS) orow[c] = row[c] * rstd * w[c];
}

torch::Tensor rms_norm_forward(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rms_norm_forward: tensors must be CUDA");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "rms_norm_forward: tensors must be float32");
    TORCH_CHECK(x.dim() >= 1 && weight.numel() == x.size(-1), "rms_norm_forward: weight size mismatch");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    if (rows == 0) return out;
    rms_norm_kernel<<<(unsigned int)rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), out.data_ptr<float>(), cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor rms_norm_forward(torch::Tensor x, torch::Tensor weight, double eps);"

rms_ext = load_inline(
    name="kw_rms_norm_cuda_correct",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rms_norm_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))  # as Model creates it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_ext.rms_norm_forward(x, self.weight, self.eps)
