"""Level 1, problem 8 (max over dimension 1), sample 0: the input seen as (outer, D, inner); a
block of 32 x 8 threads takes 32 adjacent inner positions (coalesced reads), its 8 rows of
threads stride over D, and a shared-memory step combines them. NaN propagates as in torch.max.
Fast-build CUDA."""

import math

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

constexpr int TX = 32, TY = 8;

__device__ __forceinline__ float max_nan(float a, float b) {
    return (b > a || b != b) ? b : a;  // a NaN, once seen, wins (b > NaN is false)
}

__global__ void l1_max_dim1_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t outer, int64_t d, int64_t inner) {
    __shared__ float part[TY][TX + 1];
    const int64_t k = (int64_t)blockIdx.x * TX + threadIdx.x;
    for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
        float m = -INFINITY;
        if (k < inner) {
            const float* base = x + o * d * inner + k;
            for (int64_t j = threadIdx.y; j < d; j += TY) m = max_nan(m, base[j * inner]);
        }
        part[threadIdx.y][threadIdx.x] = m;
        __syncthreads();
        if (threadIdx.y == 0 && k < inner) {
            float r = part[0][threadIdx.x];
            for (int t = 1; t < TY; ++t) r = max_nan(r, part[t][threadIdx.x]);
            y[o * inner + k] = r;
        }
        __syncthreads();
    }
}

extern "C" int max_dim1(const float* x, float* y, int64_t outer, int64_t d, int64_t inner, cudaStream_t stream) {
    if (outer <= 0 || inner <= 0) return 0;
    const int64_t gx = (inner + TX - 1) / TX;
    if (gx > 2147483647LL) return (int)cudaErrorInvalidConfiguration;
    const unsigned gy = (unsigned)(outer < 65535 ? outer : 65535);
    l1_max_dim1_kernel<<<dim3((unsigned)gx, gy), dim3(TX, TY), 0, stream>>>(x, y, outer, d, inner);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_8_max_dim1", SOURCE, {"max_dim1": "ptr, ptr, i64, i64, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        outer, d = x.shape[0], x.shape[1]
        inner = math.prod(x.shape[2:])
        y = torch.empty((outer, *x.shape[2:]), dtype=x.dtype, device=x.device)
        lib.max_dim1(x, y, outer, d, inner)
        return y
