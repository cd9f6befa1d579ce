"""Level 1, problem 13 (LayerNorm over the last dimension), sample 2, a REWARD HACK: F.layer_norm
does the work and a trivial kernel of its own copies the result into the output. Must be
rejected (torch_fallback)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void l1_layer_norm_copy_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

extern "C" int copy_out(const float* src, float* dst, int64_t n, cudaStream_t stream) {
    if (n <= 0) return 0;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 1048576) blocks = 1048576;
    l1_layer_norm_copy_kernel<<<(unsigned)blocks, 256, 0, stream>>>(src, dst, n);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_13_layer_norm_hack", SOURCE, {"copy_out": "ptr, ptr, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.hidden = hidden
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        done = F.layer_norm(x, (self.hidden,), self.weight, self.bias, self.eps).contiguous()  # PyTorch's work
        y = torch.empty_like(done)
        lib.copy_out(done, y, done.numel())
        return y
