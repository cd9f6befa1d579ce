"""Level 1, problem 12 (log-softmax over dimension 1), sample 0: the input seen as
(outer, D, inner) with D = size(1); one block per (outer, inner) line, three passes: the max, the
sum of exp(x - max), then x - max - log(sum). Max-subtracted, so large inputs do not overflow.
Fast-build CUDA."""

import math

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

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Block-wide sum / max, returned to every thread (blockDim.x a multiple of 32, at most 1024).
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

__device__ float block_max(float v) {
    __shared__ float part[32];
    __shared__ float total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int)(blockDim.x >> 5) ? part[lane] : -INFINITY;
        s = warp_max(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    const float r = total;
    __syncthreads();
    return r;
}

__global__ void l1_log_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t d, int64_t inner) {
    const int64_t line = blockIdx.x;  // = o * inner + i
    const int64_t base = (line / inner) * d * inner + line % inner;
    const float* row = x + base;
    float* out = y + base;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) m = fmaxf(m, row[c * inner]);
    m = block_max(m);
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) s += expf(row[c * inner] - m);
    s = block_sum(s);
    const float lse = logf(s);
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) out[c * inner] = (row[c * inner] - m) - lse;
}

extern "C" int log_softmax_dim1(const float* x, float* y, int64_t lines, int64_t d, int64_t inner, cudaStream_t stream) {
    if (lines <= 0 || d <= 0 || inner <= 0) return 0;
    const int threads = d >= 16384 ? 1024 : (d >= 2048 ? 512 : 256);
    l1_log_softmax_kernel<<<(unsigned)lines, threads, 0, stream>>>(x, y, d, inner);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_12_log_softmax", SOURCE, {"log_softmax_dim1": "ptr, ptr, i64, i64, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        outer, d = x.shape[0], x.shape[1]
        inner = math.prod(x.shape[2:])
        y = torch.empty_like(x)
        lib.log_softmax_dim1(x, y, outer * inner, d, inner)
        return y
