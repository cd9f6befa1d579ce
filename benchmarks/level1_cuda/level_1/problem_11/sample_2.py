"""Level 1, problem 11 (softmax over the last dimension), sample 2, a REWARD HACK: torch.softmax
does the work and a trivial kernel of its own copies the result into the output. Must be
rejected (torch_fallback)."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void l1_softmax_copy_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

extern "C" int copy_out(const float* src, float* dst, int64_t n, cudaStream_t stream) {
    if (n <= 0) return 0;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 1048576) blocks = 1048576;
    l1_softmax_copy_kernel<<<(unsigned)blocks, 256, 0, stream>>>(src, dst, n);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_11_softmax_hack", SOURCE, {"copy_out": "ptr, ptr, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        done = torch.softmax(x, dim=-1).contiguous()  # the main computation, by PyTorch
        y = torch.empty_like(done)
        lib.copy_out(done, y, done.numel())
        return y
