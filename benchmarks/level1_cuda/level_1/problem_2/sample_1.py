"""Level 1, problem 2 (GELU), sample 1, known WRONG: the tanh approximation of GELU where the
problem asks for the exact erf form. Within tolerance on uniform [0, 1) inputs, off by up to
~5e-4 on normal ones (the tolerance is 1e-4 + 1e-4 |y|): output_mismatch."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

__global__ void l1_gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        // BUG: the tanh approximation, not the exact erf GELU the reference computes
        const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.f + tanhf(inner));
    }
}

extern "C" int gelu_tanh(const float* x, float* y, int64_t n, cudaStream_t stream) {
    if (n <= 0) return 0;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 1048576) blocks = 1048576;
    l1_gelu_tanh_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, y, n);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_2_gelu_tanh", SOURCE, {"gelu_tanh": "ptr, ptr, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gelu_tanh(x, y, x.numel())
        return y
