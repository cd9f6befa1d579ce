"""Oracle, known WRONG: CUDA sum whose per-thread partial sums are kept in fp16 (__half).

Each of 32 threads per row sums cols/32 values (64 at the small size, 384 at the default) in
half precision, rounding after every addition; the partial sums reach ~10-20, where one fp16
step is 1/128 to 1/64, so rows end up off by ~0.05 and more: far beyond atol 1e-3 / rtol 1e-4.
Wrong on the default inputs already.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

constexpr int THREADS = 32;

__global__ void row_sum_half_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float red[THREADS];
    const float* row = x + blockIdx.x * cols;
    const int t = threadIdx.x;
    __half acc = __float2half(0.0f);  // BUG: half-precision accumulator
    for (int64_t c = t; c < cols; c += THREADS) acc = __float2half(__half2float(acc) + row[c]);
    red[t] = __half2float(acc);
    __syncthreads();
    if (t == 0) {
        float s = 0.0f;
        for (int i = 0; i < THREADS; ++i) s += red[i];
        y[blockIdx.x] = s;
    }
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
    row_sum_half_kernel<<<(unsigned int)rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor sum_last_dim(torch::Tensor x);"

sum_ext = load_inline(
    name="kw_sum_reduction_cuda_wrong_half_accum",
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
