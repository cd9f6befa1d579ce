"""Level 1, problem 20 (conv2d, k x k kernel, stride 1, padding k // 2, with bias, NCHW), sample 0:
a direct convolution. A block of 128 threads takes 128 consecutive output pixels of one image
for 8 output channels; the weights of those channels are staged in shared memory a chunk of
input channels at a time, and each input value loaded feeds all 8 channels. Any batch, spatial
size and channel counts; zero padding by bounds checks. The weight and bias are the nn.Conv2d's,
created as Model creates it. Fast-build CUDA."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

constexpr int OCB = 8;    // output channels per block
constexpr int PIX = 128;  // output pixels per block (one per thread)
constexpr int SMEM_FLOATS = 8192;

// x (N, C, H, W), w (OC, C, KH, KW), bias (OC) or NULL, y (N, OC, HO, WO); stride 1, padding P.
__global__ void __launch_bounds__(PIX) l1_conv2d_kernel(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ bias, float* __restrict__ y, int C, int H, int W, int OC, int KH, int KW, int P,
        int HO, int WO, int CB) {
    extern __shared__ float ws[];  // [OCB][CB][KH * KW]
    const int n = blockIdx.z;
    const int oc0 = blockIdx.y * OCB;
    const int64_t plane = (int64_t)HO * WO;
    const int64_t p = (int64_t)blockIdx.x * PIX + threadIdx.x;
    const bool active = p < plane;
    const int oh = active ? (int)(p / WO) : 0;
    const int ow = active ? (int)(p % WO) : 0;
    const int KK = KH * KW;
    float acc[OCB];
#pragma unroll
    for (int o = 0; o < OCB; ++o) acc[o] = 0.f;
    for (int c0 = 0; c0 < C; c0 += CB) {
        const int cb = min(CB, C - c0);
        __syncthreads();  // the previous chunk's weights are no longer read
        for (int i = threadIdx.x; i < OCB * cb * KK; i += PIX) {
            const int o = i / (cb * KK), rem = i % (cb * KK);
            const int c = rem / KK, kk = rem % KK;
            ws[(o * CB + c) * KK + kk] = (oc0 + o < OC) ? w[((int64_t)(oc0 + o) * C + c0 + c) * KK + kk] : 0.f;
        }
        __syncthreads();
        if (active) {
            for (int c = 0; c < cb; ++c) {
                const float* xc = x + ((int64_t)n * C + c0 + c) * H * W;
                const float* wc = ws + c * KK;
                for (int kh = 0; kh < KH; ++kh) {
                    const int ih = oh - P + kh;
                    if (ih < 0 || ih >= H) continue;
                    for (int kw = 0; kw < KW; ++kw) {
                        const int iw = ow - P + kw;
                        if (iw < 0 || iw >= W) continue;
                        const float v = xc[(int64_t)ih * W + iw];
                        const float* wp = wc + kh * KW + kw;
#pragma unroll
                        for (int o = 0; o < OCB; ++o) acc[o] = fmaf(v, wp[o * CB * KK], acc[o]);
                    }
                }
            }
        }
    }
    if (!active) return;
#pragma unroll
    for (int o = 0; o < OCB; ++o) {
        const int oc = oc0 + o;
        if (oc < OC) y[((int64_t)n * OC + oc) * plane + p] = acc[o] + (bias ? bias[oc] : 0.f);
    }
}

extern "C" int conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                      int64_t W, int64_t OC, int64_t KH, int64_t KW, int64_t P, cudaStream_t stream) {
    const int64_t HO = H + 2 * P - KH + 1, WO = W + 2 * P - KW + 1;
    if (N <= 0 || OC <= 0 || HO <= 0 || WO <= 0) return 0;
    if (N > 65535 || C > 2147483647LL || H * W > 2147483647LL) return (int)cudaErrorInvalidValue;
    const int64_t kk = KH * KW;
    int64_t cb = SMEM_FLOATS / (OCB * kk);
    if (cb < 1) cb = 1;
    if (cb > C) cb = C;
    if (C == 0) cb = 1;
    const size_t smem = (size_t)(OCB * cb * kk) * sizeof(float);
    if (smem > 48 * 1024) return (int)cudaErrorInvalidConfiguration;  // kernels over ~38 x 38 taps
    const dim3 grid((unsigned)((HO * WO + PIX - 1) / PIX), (unsigned)((OC + OCB - 1) / OCB), (unsigned)N);
    if (grid.y > 65535) return (int)cudaErrorInvalidConfiguration;
    l1_conv2d_kernel<<<grid, PIX, smem, stream>>>(x, w, bias, y, (int)C, (int)H, (int)W, (int)OC, (int)KH, (int)KW,
                                                   (int)P, (int)HO, (int)WO, (int)cb);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels(
    "kw_l1_20_conv2d",
    SOURCE,
    {"conv2d": "ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i64, stream"},
    lang="cuda",
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # The same layer as Model's: its weight and bias are drawn exactly as Model's are.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.conv.weight.contiguous()
        bias = self.conv.bias
        n, c, h, w = x.shape
        oc, _, kh, kw = weight.shape
        pad = self.conv.padding[0]
        y = torch.empty((n, oc, h + 2 * pad - kh + 1, w + 2 * pad - kw + 1), dtype=x.dtype, device=x.device)
        lib.conv2d(x, weight, None if bias is None else bias.contiguous(), y, n, c, h, w, oc, kh, kw, pad)
        return y
