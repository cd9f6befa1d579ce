"""Oracle: correct CUDA sum over the last dimension: one block per row, fp32 partial sums per
thread, then a shared-memory tree."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int THREADS = 256;

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float red[THREADS];
    const float* row = x + blockIdx.x * cols;
    const int t = threadIdx.x;
    float acc = 0.0f;
    for (int64_t c = t; c < cols; c += THREADS) acc += row[c];
    red[t] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    if (t == 0) y[blockIdx.x] = red[0];
}

torch::Tensor sum_last_dim(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "sum_last_dim: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_last_dim: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "sum_last_dim: x must have at least one dimension");
    auto xc = x.contiguous();
    auto sizes = xc.sizes().vec();
    const int64_t cols = sizes.back();
    sizes.pop_back();
    auto out = torch::empty(sizes, xc.options());
    const int64_t rows = out.numel();
    if (rows == 0) return out;
    if (cols == 0) return out.zero_();
    row_sum_kernel<<<(unsigned int)rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor sum_last_dim(torch::Tensor x);"

sum_ext = load_inline(
    name="kw_sum_reduction_cuda_correct",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_last_dim"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_last_dim(x)
