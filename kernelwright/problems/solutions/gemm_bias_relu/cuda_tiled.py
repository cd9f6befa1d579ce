"""Oracle: correct CUDA fused linear + bias + ReLU with 16x16 shared-memory tiles.

y = relu(x @ W^T + b); leading dims of x are flattened into rows; edge tiles are zero-padded
in shared memory and stores are bounds-checked, so any M, N, K works.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int TILE = 16;

__global__ void linear_relu_kernel(const float* __restrict__ X, const float* __restrict__ W,
                                   const float* __restrict__ b, float* __restrict__ Y,
                                   int64_t M, int64_t N, int64_t K) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];
    const int64_t row = blockIdx.y * (int64_t)TILE + threadIdx.y;  // along M
    const int64_t col = blockIdx.x * (int64_t)TILE + threadIdx.x;  // along N
    const int64_t wrow = blockIdx.x * (int64_t)TILE + threadIdx.y; // the W row this thread loads
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += TILE) {
        const int64_t kx = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? X[row * K + kx] : 0.0f;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && kx < K) ? W[wrow * K + kx] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        __syncthreads();
    }
    if (row < M && col < N) {
        const float v = acc + b[col];
        Y[row * N + col] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "linear_relu_forward: tensors must be CUDA");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "linear_relu_forward: tensors must be float32");
    TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "linear_relu_forward: bad shapes");
    TORCH_CHECK(bias.numel() == weight.size(0), "linear_relu_forward: bias size mismatch");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int64_t K = wc.size(1), N = wc.size(0);
    const int64_t M = K == 0 ? 0 : xc.numel() / K;
    auto sizes = xc.sizes().vec();
    sizes.back() = N;
    auto out = torch::empty(sizes, xc.options());
    if (M == 0 || N == 0) return out;
    dim3 block(TILE, TILE);
    dim3 grid((unsigned int)((N + TILE - 1) / TILE), (unsigned int)((M + TILE - 1) / TILE));
    linear_relu_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

gemm_ext = load_inline(
    name="kw_gemm_bias_relu_cuda_tiled",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_relu_forward"],
    verbose=False,
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same creation as Model: same weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.linear_relu_forward(x, self.linear.weight, self.linear.bias)
