"""Level 1, problem 11 (softmax over the last dimension), sample 1, known WRONG: exp(x) / sum
exp(x) without subtracting the row max. Right on unit-scale inputs; on the large-value trial
(x ~ 100 N(0, 1)) exp overflows to inf and inf / inf gives NaN: nonfinite_output."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

constexpr int THREADS = 256;

__global__ void l1_softmax_nomax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float red[THREADS];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    const int t = threadIdx.x;
    float s = 0.f;
    for (int64_t c = t; c < cols; c += THREADS) s += expf(row[c]);  // BUG: no max subtraction
    red[t] = s;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (t < k) red[t] += red[t + k];
        __syncthreads();
    }
    const float total = red[0];
    for (int64_t c = t; c < cols; c += THREADS) out[c] = expf(row[c]) / total;
}

extern "C" int softmax_nomax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return 0;
    l1_softmax_nomax_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(x, y, cols);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_11_softmax_nomax", SOURCE, {"softmax_nomax": "ptr, ptr, i64, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        y = torch.empty_like(x)
        lib.softmax_nomax(x, y, x.numel() // max(cols, 1), cols)
        return y
