"""Level 1, problem 22 (max pool 2-D, k x k window, stride s, padding p, NCHW), sample 0: one
thread per output element in a grid-stride loop, the max over the window's in-bounds positions
(padding never wins, as nn.MaxPool2d); output size floor((H + 2p - k) / s) + 1. NaN propagates
as in PyTorch. Any leading dimensions and spatial size. Fast-build CUDA."""

import math

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

__global__ void l1_max_pool2d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t total, int H,
                                     int W, int HO, int WO, int K, int S, int P) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += stride) {
        const int ow = (int)(i % WO);
        const int oh = (int)((i / WO) % HO);
        const int64_t plane = i / ((int64_t)WO * HO);
        const float* xp = x + plane * H * W;
        const int h0 = oh * S - P, w0 = ow * S - P;
        float m = -INFINITY;
        for (int kh = 0; kh < K; ++kh) {
            const int ih = h0 + kh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < K; ++kw) {
                const int iw = w0 + kw;
                if (iw < 0 || iw >= W) continue;
                const float v = xp[(int64_t)ih * W + iw];
                if (v > m || v != v) m = v;
                if (m != m) break;
            }
            if (m != m) break;
        }
        y[i] = m;
    }
}

extern "C" int max_pool2d(const float* x, float* y, int64_t planes, int64_t H, int64_t W, int64_t HO, int64_t WO,
                          int64_t K, int64_t S, int64_t P, cudaStream_t stream) {
    if (planes <= 0 || HO <= 0 || WO <= 0) return 0;
    const int64_t total = planes * HO * WO;
    int64_t blocks = (total + 255) / 256;
    if (blocks > 1048576) blocks = 1048576;
    l1_max_pool2d_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, y, total, (int)H, (int)W, (int)HO, (int)WO, (int)K,
                                                               (int)S, (int)P);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels(
    "kw_l1_22_max_pool2d",
    SOURCE,
    {"max_pool2d": "ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i64, stream"},
    lang="cuda",
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        k, s, p = self.kernel_size, self.stride, self.padding
        h, w = x.shape[-2], x.shape[-1]
        ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        planes = math.prod(x.shape[:-2])
        y = torch.empty((*x.shape[:-2], ho, wo), dtype=x.dtype, device=x.device)
        lib.max_pool2d(x, y, planes, h, w, ho, wo, k, s, p)
        return y
