"""Level 1, problem 14 (RMSNorm over the last dimension), sample 0: one block per row, a block
reduction of the sum of squares, then x * rsqrt(mean(x^2) + eps) * weight. weight is created
exactly as Model creates it. Fast-build CUDA."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// The sum of v over the block, in every thread (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v) {
    __shared__ float part[32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    const float r = total;
    __syncthreads();
    return r;
}

__global__ void l1_rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                   int64_t cols, float eps) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) q += row[c] * row[c];
    const float r = rsqrtf(block_sum(q) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = row[c] * r * w[c];
}

extern "C" int rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                        cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return 0;
    const int threads = cols >= 16384 ? 1024 : (cols >= 2048 ? 512 : 256);
    l1_rms_norm_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, w, y, cols, eps);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_14_rms_norm", SOURCE, {"rms_norm": "ptr, ptr, ptr, i64, i64, f32, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))  # as Model creates it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        y = torch.empty_like(x)
        lib.rms_norm(x, self.weight.contiguous(), y, x.numel() // max(cols, 1), cols, self.eps)
        return y
