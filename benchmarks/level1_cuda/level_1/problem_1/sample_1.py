"""Level 1, problem 1 (ReLU), sample 1, known WRONG: one CUDA block per full 64-element block, so
the elements past the last multiple of 64 keep the zeros the output was allocated with. Right on
the default inputs (numel a multiple of 64), wrong on the shape variants (1000 x 4097, ...)."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void l1_relu_tail64_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t full) {
    const int64_t i = blockIdx.x * (int64_t)64 + threadIdx.x;
    if (i < full) {
        const float v = x[i];
        y[i] = v < 0.f ? 0.f : v;
    }
}

extern "C" int relu_tail64(const float* x, float* y, int64_t n, cudaStream_t stream) {
    const int64_t blocks = n / 64;  // BUG: the last partial block is dropped
    if (blocks == 0) return 0;
    l1_relu_tail64_kernel<<<(unsigned)blocks, 64, 0, stream>>>(x, y, blocks * 64);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_1_relu_tail64", SOURCE, {"relu_tail64": "ptr, ptr, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.zeros_like(x)  # zeros: the unprocessed tail is deterministically wrong
        lib.relu_tail64(x, y, x.numel())
        return y
