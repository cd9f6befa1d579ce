"""Level 1, problem 7 (sum over the last dimension), sample 1, known WRONG: an off-by-one in the
row loop (`c < cols - 1`) leaves the last element of every row out of its sum: errors ~1 on
every input (the tolerance is 1e-3): output_mismatch."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

constexpr int THREADS = 256;

__global__ void l1_row_sum_short_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float red[THREADS];
    const float* row = x + (int64_t)blockIdx.x * cols;
    const int t = threadIdx.x;
    float acc = 0.f;
    for (int64_t c = t; c < cols - 1; c += THREADS) acc += row[c];  // BUG: the last column is skipped
    red[t] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        __syncthreads();
    }
    if (t == 0) y[blockIdx.x] = red[0];
}

extern "C" int row_sum_short(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return 0;
    l1_row_sum_short_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(x, y, cols);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_7_sum_off_by_one", SOURCE, {"row_sum_short": "ptr, ptr, i64, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        lib.row_sum_short(x, y, y.numel(), x.shape[-1])
        return y
