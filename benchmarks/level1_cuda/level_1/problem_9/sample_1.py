"""Level 1, problem 9 (argmax over the last dimension), sample 1, known WRONG: the right indices,
written as int32 where torch.argmax returns int64: dtype_mismatch on every input."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

constexpr int THREADS = 256;

__global__ void l1_argmax_i32_kernel(const float* __restrict__ x, int* __restrict__ y, int64_t cols) {
    __shared__ float sv[THREADS];
    __shared__ int si[THREADS];
    const float* row = x + (int64_t)blockIdx.x * cols;
    const int t = threadIdx.x;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int64_t c = t; c < cols; c += THREADS) {
        const float v = row[c];
        if (v > bv || (v == bv && (int)c < bi)) { bv = v; bi = (int)c; }
    }
    sv[t] = bv;
    si[t] = bi;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) {
            const float ov = sv[t + s];
            const int oi = si[t + s];
            if (ov > sv[t] || (ov == sv[t] && oi < si[t])) { sv[t] = ov; si[t] = oi; }
        }
        __syncthreads();
    }
    if (t == 0) y[blockIdx.x] = si[0] == 0x7fffffff ? 0 : si[0];
}

extern "C" int argmax_i32(const float* x, int* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return 0;
    l1_argmax_i32_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(x, y, cols);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels("kw_l1_9_argmax_i32", SOURCE, {"argmax_i32": "ptr, ptr, i64, i64, stream"}, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape[:-1], dtype=torch.int32, device=x.device)  # BUG: torch.argmax gives int64
        lib.argmax_i32(x, y, y.numel(), x.shape[-1])
        return y
