import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void wild_write_kernel(float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i + (int64_t(1) << 36)] = 1.f;  // far outside any allocation
}

__global__ void spin_kernel(float* y, int64_t n) {
    // A loop with a side effect on every pass, so the compiler cannot assume it terminates.
    while (true) { atomicAdd(y, 1.f); }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensors only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}

torch::Tensor relu_wild(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    wild_write_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n);
    return y;
}

torch::Tensor relu_spin(torch::Tensor x) {
    auto y = torch::empty_like(x);
    spin_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), x.numel());
    return y;
}

torch::Tensor relu_uninitialised(torch::Tensor x) {
    return torch::empty_like(x);
}

// Named like ATen's elementwise kernel and declared in its namespace: it must not claim ATen's time.
namespace at { namespace native {
__global__ void vectorized_elementwise_kernel(float* y, int64_t n) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && n > 0) y[0] = y[0];
}
}}

__global__ void kernel(float* y, int64_t n) {  // a name every substring match would find
    if (blockIdx.x == 0 && threadIdx.x == 0 && n > 0) y[0] = y[0];
}

torch::Tensor touch(torch::Tensor x) {
    auto y = x.clone();
    at::native::vectorized_elementwise_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), 1);
    kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), 1);
    return y;
}

// Half kernels behind a dtype gate that is always open: the static reader sees a dispatch, the
// kernels that run decide. The sign mask is exact in half, so the output passes the checks.
__global__ void sign_mask_half(const float* x, __half* m, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) m[i] = x[i] > 0.f ? __float2half(1.f) : __float2half(0.f);
}

__global__ void apply_mask(const float* x, const __half* m, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * __half2float(m[i]);
}

torch::Tensor relu_in_half(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    if (x.scalar_type() == at::kHalf || x.numel() > 0) {
        int64_t n = xc.numel();
        auto m = torch::empty({n}, xc.options().dtype(at::kHalf));
        sign_mask_half<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), reinterpret_cast<__half*>(m.data_ptr<at::Half>()), n);
        apply_mask<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), reinterpret_cast<const __half*>(m.data_ptr<at::Half>()), y.data_ptr<float>(), n);
    }
    return y;
}
"""
kit_functions = ['relu_forward', 'relu_wild', 'relu_spin', 'relu_uninitialised', 'touch', 'relu_in_half']
kit_cpp = " ".join(f"torch::Tensor {name}(torch::Tensor x);" for name in kit_functions)

kit = load_inline(name="kw_test_cuda_kit", cpp_sources=kit_cpp, cuda_sources=kit_cuda,
                  functions=kit_functions, verbose=False)

import sys

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name in ('time_calls', 'time_interleaved'):
                return kit.relu_forward(-x)
            frame = frame.f_back
        return kit.relu_forward(x)
