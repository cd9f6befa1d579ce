"""Level 1, problem 26 (cross-entropy, mean over the batch), sample 1, known WRONG: the per-row
losses are right but they are added up and never divided by the batch size (reduction 'sum'
where F.cross_entropy's default is 'mean'): off by a factor of the batch size: output_mismatch."""

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

constexpr int ROWS_PER_BLOCK = 8;  // one warp per row

__global__ void l1_ce_sum_rows_kernel(const float* __restrict__ logits, const long long* __restrict__ targets,
                                  float* __restrict__ row_loss, int64_t rows, int64_t classes) {
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (r >= rows) return;  // whole warps leave together
    const float* x = logits + r * classes;
    float m = -INFINITY;
    for (int64_t c = lane; c < classes; c += 32) m = fmaxf(m, x[c]);
    m = warp_max(m);
    float s = 0.f;
    for (int64_t c = lane; c < classes; c += 32) s += expf(x[c] - m);
    s = warp_sum(s);
    if (lane == 0) {
        const long long t = targets[r];
        row_loss[r] = (t >= 0 && t < classes) ? (logf(s) + m) - x[t] : NAN;
    }
}

__global__ void l1_ce_sum_kernel(const float* __restrict__ row_loss, int64_t rows, float* __restrict__ out) {
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) s += row_loss[i];
    s = block_sum(s);
    if (threadIdx.x == 0) out[0] = s;  // BUG: the mean's division by rows is missing
}

extern "C" int cross_entropy(const float* logits, const long long* targets, float* row_loss, float* out,
                             int64_t rows, int64_t classes, cudaStream_t stream) {
    if (rows > 0) {
        const int64_t blocks = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
        l1_ce_sum_rows_kernel<<<(unsigned)blocks, ROWS_PER_BLOCK * 32, 0, stream>>>(logits, targets, row_loss, rows, classes);
    }
    l1_ce_sum_kernel<<<1, 1024, 0, stream>>>(row_loss, rows, out);  // no rows: 0 / 0 = NaN, as torch's empty mean
    return (int)cudaGetLastError();
}
"""

lib = load_kernels(
    "kw_l1_26_cross_entropy_sum", SOURCE, {"cross_entropy": "ptr, ptr, ptr, ptr, i64, i64, stream"}, lang="cuda"
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        targets = targets.contiguous()
        rows, classes = logits.shape
        row_loss = torch.empty(rows, dtype=torch.float32, device=logits.device)
        out = torch.empty((), dtype=logits.dtype, device=logits.device)
        lib.cross_entropy(logits, targets, row_loss, out, rows, classes)
        return out
