"""Level 1, problem 15 (square matmul C = A @ B), sample 1, known WRONG: the tiled kernel walks
only the full 16-deep K slices (K / 16 of them, rounded down), so when K is not a multiple of 16
the last K % 16 products are never added. Right at the default N = 4096, wrong on the variants
(1000 x 1000 leaves 8 terms out, 2049 x 2049 one): output_mismatch."""

import torch
import torch.nn as nn

from kernelwright.fastext import load_kernels

SOURCE = r"""
#include <cstdint>
#include <cuda_runtime.h>

constexpr int BM = 64, BN = 64, BK = 16, THREADS = 256;

// C (M x N) = A (M x K) @ B (K x N), all row-major; blockIdx.z steps over a batch by the strides.
__global__ void __launch_bounds__(THREADS) l1_sgemm_ktail_kernel(const float* __restrict__ A, const float* __restrict__ B,
        float* __restrict__ C, int M, int N, int K, int64_t sA, int64_t sB, int64_t sC) {
    __shared__ float As[BK][BM + 1];  // A's tile stored k-major: As[k][m]
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    A += (int64_t)blockIdx.z * sA;
    B += (int64_t)blockIdx.z * sB;
    C += (int64_t)blockIdx.z * sC;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    for (int k0 = 0; k0 + BK <= K; k0 += BK) {  // BUG: the partial last K slice is skipped
#pragma unroll
        for (int l = 0; l < 4; ++l) {  // A tile: 64 rows x 16 k, k fastest (coalesced)
            const int idx = tid + l * THREADS, r = idx / BK, c = idx % BK;
            const int gm = m0 + r, gk = k0 + c;
            As[c][r] = (gm < M && gk < K) ? A[(int64_t)gm * K + gk] : 0.f;
        }
#pragma unroll
        for (int l = 0; l < 4; ++l) {  // B tile: 16 k x 64 columns, columns fastest
            const int idx = tid + l * THREADS, r = idx / BN, c = idx % BN;
            const int gk = k0 + r, gn = n0 + c;
            Bs[r][c] = (gk < K && gn < N) ? B[(int64_t)gk * N + gn] : 0.f;
        }
        __syncthreads();
        float part[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) part[i][j] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) part[i][j] = fmaf(a[i], b[j], part[i][j]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] += part[i][j];
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int gm = m0 + ty + 16 * i;
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int gn = n0 + tx + 16 * j;
            if (gn < N) C[(int64_t)gm * N + gn] = acc[i][j];
        }
    }
}

extern "C" int matmul_ktail(const float* A, const float* B, float* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                      cudaStream_t stream) {
    if (batch <= 0 || M <= 0 || N <= 0) return 0;
    if (M > 2147483647LL || N > 2147483647LL || K > 2147483647LL || batch > 65535) return (int)cudaErrorInvalidValue;
    if (K <= 0) return (int)cudaMemsetAsync(C, 0, (size_t)(batch * M * N) * sizeof(float), stream);
    const dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM), (unsigned)batch);
    if (grid.y > 65535) return (int)cudaErrorInvalidConfiguration;
    l1_sgemm_ktail_kernel<<<grid, THREADS, 0, stream>>>(A, B, C, (int)M, (int)N, (int)K, M * K, K * N, M * N);
    return (int)cudaGetLastError();
}
"""

lib = load_kernels(
    "kw_l1_15_matmul_ktail", SOURCE, {"matmul_ktail": "ptr, ptr, ptr, i64, i64, i64, i64, stream"}, lang="cuda"
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        lib.matmul_ktail(A, B, C, 1, M, N, K)
        return C
