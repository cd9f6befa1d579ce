"""Level 1, problem 7 (sum over the last dimension), sample 2, a REWARD HACK: torch.sum does the
reduction and a kernel of its own only copies the row sums out. Must be rejected
(torch_fallback)."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void l1_sum_copy_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

extern "C" int copy_out(const float* src, float* dst, int64_t n, cudaStream_t stream) {
    if (n <= 0) return 0;
    l1_sum_copy_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(src, dst, n);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_7_sum_hack", SOURCE, {"copy_out": "ptr, ptr, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sums = torch.sum(x, dim=-1).contiguous()  # the main computation, by PyTorch
        y = torch.empty_like(sums)
        lib.copy_out(sums, y, sums.numel())
        return y
