"""Level 1, problem 24 (inclusive cumsum along the last dimension), sample 1, known WRONG: the
block scan of sample 0 writing the exclusive prefix sum (y[j] = sum of x[k] for k < j) where
torch.cumsum is inclusive: every output is off by its own input value: output_mismatch."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

#define FULL_MASK 0xffffffffu

constexpr int THREADS = 256, ITEMS = 8, WARPS = THREADS / 32;
constexpr int64_t CHUNK = (int64_t)THREADS * ITEMS;

__global__ void __launch_bounds__(THREADS) l1_cumsum_exclusive_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                            int64_t cols) {
    __shared__ float warp_incl[WARPS];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float carry = 0.f;  // the sum of every earlier chunk (the same in every thread)
    for (int64_t base = 0; base < cols; base += CHUNK) {
        const int64_t start = base + (int64_t)threadIdx.x * ITEMS;
        float v[ITEMS];
        float run = 0.f;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {  // the thread's own inclusive scan
            const int64_t j = start + i;
            run += j < cols ? row[j] : 0.f;
            v[i] = run;
        }
        float incl = run;  // inclusive scan of the thread totals within the warp
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float t = __shfl_up_sync(FULL_MASK, incl, o);
            if (lane >= o) incl += t;
        }
        float excl = __shfl_up_sync(FULL_MASK, incl, 1);
        if (lane == 0) excl = 0.f;
        if (lane == 31) warp_incl[warp] = incl;
        __syncthreads();
        if (warp == 0) {  // inclusive scan of the warp totals
            float t = lane < WARPS ? warp_incl[lane] : 0.f;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const float u = __shfl_up_sync(FULL_MASK, t, o);
                if (lane >= o) t += u;
            }
            if (lane < WARPS) warp_incl[lane] = t;
        }
        __syncthreads();
        const float before = carry + (warp > 0 ? warp_incl[warp - 1] : 0.f) + excl;
        float prev = 0.f;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int64_t j = start + i;
            if (j < cols) out[j] = before + prev;  // BUG: exclusive; the inclusive value is before + v[i]
            prev = v[i];
        }
        carry += warp_incl[WARPS - 1];
        __syncthreads();  // warp_incl is written again by the next chunk
    }
}

extern "C" int cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return 0;
    l1_cumsum_exclusive_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(x, y, cols);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_24_cumsum_exclusive", SOURCE, {"cumsum_rows": "ptr, ptr, i64, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        y = torch.empty_like(x)
        lib.cumsum_rows(x, y, x.numel() // max(cols, 1), cols)
        return y
