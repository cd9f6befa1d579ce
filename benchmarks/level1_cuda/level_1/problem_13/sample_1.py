"""Level 1, problem 13 (LayerNorm over the last dimension), sample 1, known WRONG: the statistics
and the scale are right but the learned bias is never added (out = (x - mean) * rstd * weight).
The bias is random (0.1 N(0, 1)), so every row is off by ~0.1: output_mismatch."""

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

__global__ void l1_layer_norm_nobias_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                     const float* __restrict__ b, float* __restrict__ y, int64_t cols, float eps) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    const float mean = block_sum(s) / (float)cols;
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = row[c] - mean;
        q += d * d;
    }
    const float var = block_sum(q) / (float)cols;  // biased: divided by cols, not cols - 1
    const float rstd = rsqrtf(var + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * w[c];  // BUG: + b[c] forgotten
}

extern "C" int layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols,
                          float eps, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return 0;
    const int threads = cols >= 16384 ? 1024 : (cols >= 2048 ? 512 : 256);
    l1_layer_norm_nobias_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, w, b, y, cols, eps);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels(
    "kw_l1_13_layer_norm_nobias", SOURCE, {"layer_norm": "ptr, ptr, ptr, ptr, i64, i64, f32, stream"}, lang="cuda"
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.hidden = hidden
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))  # as Model creates them, in its order
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.layer_norm(
            x, self.weight.contiguous(), self.bias.contiguous(), y, x.numel() // self.hidden, self.hidden, self.eps
        )
        return y
