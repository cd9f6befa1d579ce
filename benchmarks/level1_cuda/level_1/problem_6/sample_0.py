"""Level 1, problem 6 (leaky ReLU), sample 0: x if x > 0 else slope * x (the slope a constructor
argument), one thread per element in a grid-stride loop; any shape. Fast-build CUDA."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

__global__ void l1_leaky_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float slope) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        y[i] = v > 0.f ? v : v * slope;
    }
}

extern "C" int leaky_relu(const float* x, float* y, int64_t n, float slope, cudaStream_t stream) {
    if (n <= 0) return 0;
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 1048576) blocks = 1048576;
    l1_leaky_relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, n, slope);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_6_leaky_relu", SOURCE, {"leaky_relu": "ptr, ptr, i64, f32, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.leaky_relu(x, y, x.numel(), float(self.negative_slope))
        return y
